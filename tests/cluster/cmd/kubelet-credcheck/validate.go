package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"k8s.io/kubernetes/pkg/credentialprovider/plugin"
)

// Verdict is kubelet's answer on one config.
type Verdict struct {
	Path string `json:"path"`
	// Accepted: kubelet read and validated the config. Registration may
	// still fail afterwards for lack of a binary; that is not the config's
	// fault and counts as accepted.
	Accepted bool   `json:"accepted"`
	Error    string `json:"error,omitempty"`
}

func runValidate(args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "plugin binary directory (must exist)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, path := range fs.Args() {
		var out, stderr bytes.Buffer
		cmd := exec.Command(self, "validate-one", "--bin-dir", *binDir, path)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("validate-one %s: %v: %s", path, err, stderr.String())
		}
		var v Verdict
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			return fmt.Errorf("validate-one %s: %v", path, err)
		}
		if err := emit(v); err != nil {
			return err
		}
	}
	return nil
}

func runValidateOne(args []string) error {
	fs := flag.NewFlagSet("validate-one", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "plugin binary directory (must exist)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("validate-one takes one path")
	}
	path := fs.Arg(0)
	err := plugin.RegisterCredentialProviderPlugins(path, *binDir, nil, nil)
	v := Verdict{Path: path, Accepted: err == nil}
	if err != nil {
		v.Error = err.Error()
		// Reading and validation come first in RegisterCredentialProviderPlugins;
		// these errors come only after the config passed both.
		if strings.HasPrefix(v.Error, "plugin binary executable ") ||
			strings.HasPrefix(v.Error, "error inspecting binary executable ") {
			v.Accepted = true
		}
	}
	return emit(v)
}
