package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
)

// ServiceAccount is a pod's service account, or a recorded one.
type ServiceAccount struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// PullCase is one question to kubelet's pull manager: an image already on
// the node, recorded (or not) as pulled with some credentials, and a pod
// asking for it.
type PullCase struct {
	Policy    string   `json:"policy"`
	Allowlist []string `json:"allowlist"`
	Image     string   `json:"image"`
	// Record: "none" (present, not pulled by kubelet: preloaded), "node"
	// (pulled with node credentials or anonymously: NodePodsAccessible), or
	// "service-account" (pulled with a service-account token's credentials:
	// RecordedAccount).
	Record          string          `json:"record"`
	RecordedAccount *ServiceAccount `json:"recorded_account,omitempty"`
	// The asking pod's service account (none for a static pod).
	PodAccount *ServiceAccount `json:"pod_account,omitempty"`
}

// PullVerdict is kubelet's answer: whether it must pull again (with the
// pod's own credentials) before the pod may use the image.
type PullVerdict struct {
	MustPull bool   `json:"must_pull"`
	Error    string `json:"error,omitempty"`
}

// runPullVerify answers one PullCase per stdin line with kubelet's own
// PullManager (file-backed records in a fresh directory per case, as
// kubelet keeps them under its root directory) and policy enforcer. The
// record is written as kubelet's image manager writes it after a pull
// (RecordPullIntent, then RecordImagePulled with the credentials
// trackedToImagePullCreds makes: NodePodsAccessible for a source-less
// credential, KubernetesServiceAccounts for one from a service-account
// token; pkg/kubelet/images/image_manager.go).
func runPullVerify(args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("pull-verify takes no arguments (cases on stdin)")
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var c PullCase
		if err := json.Unmarshal(scanner.Bytes(), &c); err != nil {
			return fmt.Errorf("a case: %w", err)
		}
		verdict, err := pullVerify(c)
		if err != nil {
			verdict = PullVerdict{Error: err.Error()}
		}
		if err := emit(verdict); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func pullVerify(c PullCase) (PullVerdict, error) {
	ctx := context.Background()
	logger := klog.Background()
	dir, err := os.MkdirTemp("", "kubelet-pullverify-")
	if err != nil {
		return PullVerdict{}, err
	}
	defer os.RemoveAll(dir)
	records, err := pullmanager.NewFSPullRecordsAccessor(logger, dir)
	if err != nil {
		return PullVerdict{}, err
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(
		kubeletconfig.ImagePullCredentialsVerificationPolicy(c.Policy), c.Allowlist)
	if err != nil {
		return PullVerdict{}, err
	}
	// No intents are recorded yet, so the image service is never asked.
	manager, err := pullmanager.NewImagePullManager(ctx, records, policy, nil, 10)
	if err != nil {
		return PullVerdict{}, err
	}
	const imageRef = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	switch c.Record {
	case "none":
	case "node", "service-account":
		credentials := &kubeletconfig.ImagePullCredentials{NodePodsAccessible: true}
		if c.Record == "service-account" {
			if c.RecordedAccount == nil {
				return PullVerdict{}, fmt.Errorf("record service-account needs recorded_account")
			}
			credentials = &kubeletconfig.ImagePullCredentials{
				KubernetesServiceAccounts: []kubeletconfig.ImagePullServiceAccount{{
					UID: c.RecordedAccount.UID, Namespace: c.RecordedAccount.Namespace, Name: c.RecordedAccount.Name,
				}},
			}
		}
		if err := manager.RecordPullIntent(logger, c.Image); err != nil {
			return PullVerdict{}, err
		}
		manager.RecordImagePulled(ctx, c.Image, imageRef, credentials)
	default:
		return PullVerdict{}, fmt.Errorf("unknown record %q", c.Record)
	}
	podCredentials := func() ([]kubeletconfig.ImagePullSecret, *kubeletconfig.ImagePullServiceAccount, error) {
		if c.PodAccount == nil {
			return nil, nil, nil
		}
		return nil, &kubeletconfig.ImagePullServiceAccount{
			UID: c.PodAccount.UID, Namespace: c.PodAccount.Namespace, Name: c.PodAccount.Name,
		}, nil
	}
	mustPull, err := manager.MustAttemptImagePull(ctx, c.Image, imageRef, podCredentials)
	if err != nil {
		return PullVerdict{}, err
	}
	return PullVerdict{MustPull: mustPull}, nil
}
