// Command kubelet-nodeip runs kubelet's own --node-ip parsing
// (k8s.io/component-helpers/node/util ParseNodeIPArgument, with
// --cloud-provider=external, on k8s.io/utils/net ParseIPSloppy) and the
// cloud controller manager's strict parsing of the
// alpha.kubernetes.io/provided-node-ip annotation (ParseNodeIPAnnotation),
// at the versions pinned in go.mod, for the cluster test tier's
// differential test of node-ip-helper's port of them.
//
//	kubelet-nodeip < values.json
//	    reads a JSON array of strings and prints, per value, one JSON line:
//	    {"value", "argument": {"ips", "ignored", "error"},
//	    "annotation": {"ips", "error"}}, IPs as Go's ip.String().
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"

	nodeutil "k8s.io/component-helpers/node/util"
)

type parsed struct {
	IPs     []string `json:"ips"`
	Ignored []string `json:"ignored,omitempty"`
	Error   string   `json:"error,omitempty"`
}

type verdict struct {
	Value      string `json:"value"`
	Argument   parsed `json:"argument"`
	Annotation parsed `json:"annotation"`
}

func ipStrings(ips []net.IP) []string {
	out := []string{}
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func message(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func main() {
	var values []string
	if err := json.NewDecoder(os.Stdin).Decode(&values); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-nodeip: stdin is not a JSON array of strings:", err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for _, value := range values {
		ips, ignored, err := nodeutil.ParseNodeIPArgument(value, "external")
		strict, strictErr := nodeutil.ParseNodeIPAnnotation(value)
		v := verdict{
			Value:      value,
			Argument:   parsed{IPs: ipStrings(ips), Ignored: ignored, Error: message(err)},
			Annotation: parsed{IPs: ipStrings(strict), Error: message(strictErr)},
		}
		if err := out.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, "kubelet-nodeip:", err)
			os.Exit(1)
		}
	}
}
