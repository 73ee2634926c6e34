package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/credentialprovider/plugin"
	"k8s.io/kubernetes/pkg/util/parsers"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Auth is one credential kubelet's keyring returned.
type Auth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// Source is what kubelet's pull records will say of an image pulled with
	// it: "service-account NAMESPACE/NAME" (credentials from a service-account
	// token) or "node" (NodePodsAccessible: trackedToImagePullCreds in
	// pkg/kubelet/images/image_manager.go).
	Source string `json:"source"`
}

// Lookup is kubelet's keyring answer for one image.
type Lookup struct {
	Image string `json:"image"`
	// Repo is what kubelet looks up: parsers.ParseImageName's repository.
	Repo  string `json:"repo"`
	Found bool   `json:"found"`
	Auth  []Auth `json:"auth"`
	Error string `json:"error,omitempty"`
}

// Exchange is one request the token endpoint answered.
type Exchange struct {
	GrantType    string `json:"grant_type"`
	SubjectToken string `json:"subject_token"`
	Audience     string `json:"audience"`
	AccessToken  string `json:"access_token"`
}

// Summary is the last line: what the tokens and the endpoint saw.
type Summary struct {
	Summary      bool       `json:"summary"`
	IssuedTokens []string   `json:"issued_tokens"`
	Exchanges    []Exchange `json:"exchanges"`
	TokenServer  string     `json:"token_server,omitempty"`
}

type recorder struct {
	sync.Mutex
	issued    []string
	exchanges []Exchange
	// announce: the URL each issued token is posted to (none if empty).
	announce string
}

// issue records a token issued for kubelet's code and announces it.
func (r *recorder) issue(tok string) error {
	r.Lock()
	r.issued = append(r.issued, tok)
	r.Unlock()
	if r.announce == "" {
		return nil
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(r.announce, "text/plain", strings.NewReader(tok))
	if err != nil {
		return fmt.Errorf("announcing a token: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("announcing a token: %s answered %s", r.announce, resp.Status)
	}
	return nil
}

func (r *recorder) known(tok string) bool {
	r.Lock()
	defer r.Unlock()
	for _, t := range r.issued {
		if t == tok {
			return true
		}
	}
	return false
}

// fakeToken is a JWT-shaped token for the audience, with a real exp claim
// and no valid signature: the plugin only reads claims.
func fakeToken(namespace, name, audience string, uid types.UID) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	now := time.Now().Unix()
	claims, _ := json.Marshal(map[string]any{
		"aud": []string{audience},
		"exp": now + 3600,
		"iat": now,
		"nbf": now,
		"iss": "https://kubernetes.default.svc",
		"sub": "system:serviceaccount:" + namespace + ":" + name,
		"kubernetes.io": map[string]any{
			"namespace":      namespace,
			"serviceaccount": map[string]any{"name": name, "uid": string(uid)},
		},
	})
	return header + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString([]byte("not-signed"))
}

func (r *recorder) tokenEndpoint(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err != nil || req.Method != http.MethodPost {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	subject := req.PostForm.Get("subject_token")
	grant := req.PostForm.Get("grant_type")
	w.Header().Set("Content-Type", "application/json")
	if grant != "urn:ietf:params:oauth:grant-type:token-exchange" || !r.known(subject) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	sum := sha256.Sum256([]byte(subject))
	access := "exchanged-" + hex.EncodeToString(sum[:8])
	r.Lock()
	r.exchanges = append(r.exchanges, Exchange{
		GrantType: grant, SubjectToken: subject,
		Audience: req.PostForm.Get("audience"), AccessToken: access,
	})
	r.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token":      access,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type":        "Bearer",
		"expires_in":        3600,
	})
}

func runKeyring(args []string) error {
	fs := flag.NewFlagSet("keyring", flag.ContinueOnError)
	config := fs.String("config", "", "CredentialProviderConfig file or directory")
	binDir := fs.String("bin-dir", "", "plugin binary directory")
	namespace := fs.String("namespace", "default", "pod namespace")
	podName := fs.String("pod-name", "puller", "pod name")
	podUID := fs.String("pod-uid", "00000000-0000-0000-0000-000000000001", "pod UID")
	saName := fs.String("service-account", "", "pod's service account (empty: none)")
	saUID := fs.String("service-account-uid", "00000000-0000-0000-0000-000000000002", "service account UID (fake mode)")
	kubeconfig := fs.String("kubeconfig", "", "get service accounts and tokens from this cluster (else fake ones)")
	tokenServer := fs.Bool("token-server", false, "serve an RFC 8693 token endpoint on 127.0.0.1 and replace @TOKEN_ENDPOINT@ in the config with its URL")
	announce := fs.String("announce-tokens", "", "POST each service-account token, as it is issued and before kubelet's code sees it, to this URL (a fake token endpoint learning which subject tokens to accept)")
	var annotations multiFlag
	fs.Var(&annotations, "sa-annotation", "fake service account annotation key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rec := &recorder{announce: *announce}
	summary := Summary{Summary: true}

	configPath := *config
	if *tokenServer {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: http.HandlerFunc(rec.tokenEndpoint), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		summary.TokenServer = "http://" + ln.Addr().String() + "/token"
		text, err := os.ReadFile(*config)
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "kubelet-credcheck-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		configPath = filepath.Join(dir, filepath.Base(*config))
		rewritten := strings.ReplaceAll(string(text), "@TOKEN_ENDPOINT@", summary.TokenServer)
		if err := os.WriteFile(configPath, []byte(rewritten), 0o600); err != nil {
			return err
		}
	}

	var getSA plugin.GetServiceAccountFunc
	var getToken func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	if *kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		getSA = func(namespace, name string) (*v1.ServiceAccount, error) {
			return client.CoreV1().ServiceAccounts(namespace).Get(context.Background(), name, metav1.GetOptions{})
		}
		getToken = func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			out, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, tr, metav1.CreateOptions{})
			if err != nil {
				return out, err
			}
			return out, rec.issue(out.Status.Token)
		}
	} else {
		saAnnotations := map[string]string{}
		for _, a := range annotations {
			k, v, _ := strings.Cut(a, "=")
			saAnnotations[k] = v
		}
		getSA = func(namespace, name string) (*v1.ServiceAccount, error) {
			return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: name, UID: types.UID(*saUID), Annotations: saAnnotations,
			}}, nil
		}
		getToken = func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			if len(tr.Spec.Audiences) != 1 {
				return nil, fmt.Errorf("want one audience, got %v", tr.Spec.Audiences)
			}
			tok := fakeToken(namespace, name, tr.Spec.Audiences[0], types.UID(*saUID))
			if err := rec.issue(tok); err != nil {
				return nil, err
			}
			out := tr.DeepCopy()
			out.Status.Token = tok
			out.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
			return out, nil
		}
	}

	if err := plugin.RegisterCredentialProviderPlugins(configPath, *binDir, getToken, getSA); err != nil {
		return fmt.Errorf("registering plugins: %w", err)
	}
	keyring := plugin.NewExternalCredentialProviderDockerKeyring(*namespace, *podName, *podUID, *saName)
	for _, image := range fs.Args() {
		l := Lookup{Image: image, Auth: []Auth{}}
		repo, _, _, err := parsers.ParseImageName(image)
		if err != nil {
			l.Error = err.Error()
		} else {
			l.Repo = repo
			creds, found := keyring.Lookup(repo)
			l.Found = found
			for _, c := range creds {
				source := "node"
				if c.Source != nil && c.Source.ServiceAccount != nil {
					source = "service-account " + c.Source.ServiceAccount.Namespace + "/" + c.Source.ServiceAccount.Name
				}
				l.Auth = append(l.Auth, Auth{Username: c.Username, Password: c.Password, Source: source})
			}
		}
		if err := emit(l); err != nil {
			return err
		}
	}
	rec.Lock()
	summary.IssuedTokens = append([]string{}, rec.issued...)
	summary.Exchanges = append([]Exchange{}, rec.exchanges...)
	rec.Unlock()
	if summary.IssuedTokens == nil {
		summary.IssuedTokens = []string{}
	}
	return emit(summary)
}
