package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"k8s.io/kubernetes/pkg/credentialprovider"
)

// missing marks a field left out.
var missing = &struct{}{}

// runConfigCorpus writes random CredentialProviderConfigs (JSON), each a
// random mix of valid and invalid values for every field kubelet reads.
func runConfigCorpus(args []string) error {
	fs := flag.NewFlagSet("config-corpus", flag.ContinueOnError)
	out := fs.String("out", "", "output directory")
	seed := fs.Uint64("seed", 4412, "random seed")
	count := fs.Int("count", 150, "configs to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	g := &gen{r: rand.New(rand.NewPCG(*seed, 0xc0f))}
	for range 24 {
		g.hosts = append(g.hosts, g.host())
	}
	// Each field is mutated (an invalid or odd value) with a small
	// per-config probability, so that both verdicts are common.
	pick := func(valid []any, invalid []any, p float64) any {
		if g.chance(p) {
			return invalid[g.r.IntN(len(invalid))]
		}
		return valid[g.r.IntN(len(valid))]
	}
	set := func(m map[string]any, k string, v any) {
		if v != missing {
			m[k] = v
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for n := range *count {
		p := 0.02 + 0.06*g.r.Float64() // per-field mutation rate
		cfg := map[string]any{}
		set(cfg, "apiVersion", pick([]any{"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1alpha1"},
			[]any{missing, "kubelet.config.k8s.io/v2", "example.com/v1", "v1", ""}, p))
		set(cfg, "kind", pick([]any{"CredentialProviderConfig"}, []any{missing, "KubeletConfiguration", "credentialProviderConfig", ""}, p))
		if g.chance(p / 2) {
			cfg["unknownField"] = true
		}
		nProviders := 1 + g.r.IntN(3)
		if g.chance(p / 2) {
			nProviders = 0
		}
		providers := []any{}
		for i := range nProviders {
			pr := map[string]any{}
			set(pr, "name", pick([]any{fmt.Sprintf("p%d", i), fmt.Sprintf("provider-%d", i), fmt.Sprintf("x.y%d", i), fmt.Sprintf("...%d", i), fmt.Sprintf(".a%d", i)},
				[]any{"p0", "a/b", "a b", ".", "..", "", missing}, p))
			set(pr, "apiVersion", pick([]any{"credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1alpha1"},
				[]any{missing, "", "credentialprovider.kubelet.k8s.io/v2", "kubelet.config.k8s.io/v1"}, p))
			images := []any{}
			for range g.r.IntN(3) + 1 {
				// Valid patterns unless this one is mutated.
				pattern := g.pattern(g.poolHost() + g.path())
				for tries := 0; !g.chance(p) && tries < 20; tries++ {
					if _, err := credentialprovider.ParseSchemelessURL(pattern); err == nil {
						break
					}
					pattern = g.pattern(g.poolHost() + g.path())
				}
				images = append(images, pattern)
			}
			set(pr, "matchImages", pick([]any{images}, []any{[]any{}, missing}, p))
			set(pr, "defaultCacheDuration", pick([]any{"10m", "0s", "1h30m", "1.5h", "+1m", "0", "300ms"},
				[]any{missing, "-1s", "1d", "10", "", "5 m", 10, "1H"}, p))
			if (pr["apiVersion"] == "credentialprovider.kubelet.k8s.io/v1" && g.chance(0.5)) || g.chance(p/2) {
				ta := map[string]any{}
				set(ta, "serviceAccountTokenAudience", pick([]any{"registry.example.com", "a"}, []any{"", missing}, p))
				set(ta, "cacheType", pick([]any{"Token", "ServiceAccount"}, []any{"token", "", missing, "Pod"}, p))
				set(ta, "requireServiceAccount", pick([]any{true, false}, []any{missing, "true"}, p))
				keys := func() []any {
					var ks []any
					for range g.r.IntN(3) {
						ks = append(ks, pick([]any{"example.com/a", "example.com/b", "Example.COM/c", "d"},
							[]any{"-bad", "a/b/c", "", "example.com/x_"}, p))
					}
					return ks
				}
				if ta["requireServiceAccount"] == true || g.chance(p) {
					if ks := keys(); ks != nil {
						ta["requiredServiceAccountAnnotationKeys"] = ks
					}
				}
				if ks := keys(); ks != nil {
					ta["optionalServiceAccountAnnotationKeys"] = ks
				}
				if g.chance(p / 2) {
					ta["audience"] = "x"
				}
				pr["tokenAttributes"] = ta
			}
			if g.chance(0.3) {
				pr["args"] = []any{"static", "--x=1"}
			}
			if g.chance(0.3) {
				env := map[string]any{"name": "A", "value": "b"}
				if g.chance(p) {
					env["secret"] = "c"
				}
				pr["env"] = []any{env}
			}
			if g.chance(p / 2) {
				pr["matchImage"] = []any{"x"}
			}
			providers = append(providers, pr)
		}
		set(cfg, "providers", pick([]any{providers}, []any{missing}, p/2))
		data, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, fmt.Sprintf("random-%03d.json", n)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
