// Command kustomize-render renders a kustomization directory to YAML on
// stdout with the kustomize library kubectl uses (`kubectl kustomize DIR`),
// at the version k8s.io/kubernetes pins.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize-render DIR")
		os.Exit(2)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize-render:", err)
		os.Exit(1)
	}
	out, err := resources.AsYaml()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize-render:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
}
