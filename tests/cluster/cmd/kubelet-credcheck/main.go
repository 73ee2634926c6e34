// Command kubelet-credcheck runs kubelet's own image credential provider
// code (k8s.io/kubernetes/pkg/credentialprovider and its plugin package, at
// the version pinned in go.mod) for the cluster test tier. The Rust tests in
// tests/cluster/harness call it and compare its answers with ours.
//
//	kubelet-credcheck validate --bin-dir DIR PATH...
//	    kubelet's verdict on each CredentialProviderConfig (file or
//	    directory), one JSON line per PATH. Each PATH is judged in a fresh
//	    child process, since kubelet's plugin registry is process-global.
//	kubelet-credcheck keyring --config PATH --bin-dir DIR [flags] IMAGE...
//	    registers the plugins of PATH as kubelet does and prints, per IMAGE,
//	    the credentials kubelet's keyring returns (one JSON line per IMAGE).
//	kubelet-credcheck pull-verify < CASES
//	    kubelet's pull manager (KEP-2535) on each JSON case of stdin: an
//	    image on the node, its pull record, a pod asking for it; one JSON
//	    line per case, whether kubelet must pull again first.
//	kubelet-credcheck match-corpus --out FILE [--seed N] [--patterns N] [--images N]
//	    generates match patterns and images and records kubelet's
//	    URLsMatchStr verdict on every pair.
//	kubelet-credcheck config-corpus --out DIR [--seed N] [--count N]
//	    writes random CredentialProviderConfigs mixing valid and invalid
//	    values of every field (judge them with validate).
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-credcheck validate|validate-one|keyring|pull-verify|match-corpus|config-corpus ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "validate":
		err = runValidate(os.Args[2:])
	case "validate-one":
		err = runValidateOne(os.Args[2:])
	case "keyring":
		err = runKeyring(os.Args[2:])
	case "pull-verify":
		err = runPullVerify(os.Args[2:])
	case "match-corpus":
		err = runMatchCorpus(os.Args[2:])
	case "config-corpus":
		err = runConfigCorpus(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-credcheck:", err)
		os.Exit(1)
	}
}

func emit(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(os.Stdout, string(line))
	return err
}
