// Command cloud-node-controller runs the cloud controller manager's node
// controller (k8s.io/cloud-provider controllers/node, the code every
// external cloud controller manager runs to initialize a Node) against
// that module's fake cloud, told the instance's addresses and identity by
// flags. The cluster tier's real-node test (harness/tests/node_ip_helper_real.rs)
// runs it beside a real kubelet started with --cloud-provider=external: it
// removes node.cloudprovider.kubernetes.io/uninitialized only when the
// node's provided IP is among the cloud's addresses, and, as a real cloud's
// InstancesV2 does, only for a Node that names the instance: by its
// spec.providerID, or without one by its name (--instance-name; empty:
// every name finds it). Any other Node gets cloudprovider.InstanceNotFound.
//
//	cloud-node-controller --kubeconfig FILE --address InternalIP=10.0.0.5 \
//	    --address Hostname=node-a --provider-id fake://node-a --zone z --region r \
//	    [--instance-name node-a]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/klog/v2"
)

type addressList []v1.NodeAddress

func (a *addressList) String() string { return fmt.Sprint(*a) }

func (a *addressList) Set(value string) error {
	kind, address, ok := strings.Cut(value, "=")
	if !ok || address == "" {
		return fmt.Errorf("want TYPE=ADDRESS (InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS), got %q", value)
	}
	*a = append(*a, v1.NodeAddress{Type: v1.NodeAddressType(kind), Address: address})
	return nil
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the controller's identity")
	var addresses addressList
	flag.Var(&addresses, "address", "an address the cloud reports for every instance, TYPE=ADDRESS (repeatable)")
	providerID := flag.String("provider-id", "", "the instance's provider ID (empty: none)")
	zone := flag.String("zone", "", "the instance's zone")
	region := flag.String("region", "", "the instance's region")
	instanceName := flag.String("instance-name", "", "the node name that finds the instance when a Node has no provider ID (empty: every name)")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cloud-node-controller: --kubeconfig: %v\n", err)
		os.Exit(1)
	}
	client := clientset.NewForConfigOrDie(config)

	// One instance: the controller asks InstancesV2 for its metadata and
	// matches the node's provided IP against its addresses.
	cloud := &fake.Cloud{
		EnableInstancesV2:  true,
		ExistsByProviderID: true,
		OverrideInstanceMetadata: func(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
			if node.Spec.ProviderID != "" && node.Spec.ProviderID != *providerID {
				return nil, cloudprovider.InstanceNotFound
			}
			if node.Spec.ProviderID == "" && *instanceName != "" && node.Name != *instanceName {
				return nil, cloudprovider.InstanceNotFound
			}
			return &cloudprovider.InstanceMetadata{
				ProviderID:    *providerID,
				NodeAddresses: addresses,
				Zone:          *zone,
				Region:        *region,
			}, nil
		},
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), client, cloud, 5*time.Second, 1, 1)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cloud-node-controller: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	factory.Start(ctx.Done())
	controller.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("cloud-node-controller"))
}
