package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/kubernetes/pkg/credentialprovider"
	"k8s.io/kubernetes/pkg/util/parsers"
)

// Image is one generated image reference and what kubelet makes of it.
type Image struct {
	// Image is the reference as a pod spec would carry it.
	Image string `json:"image"`
	// Repo is parsers.ParseImageName's repository: what kubelet matches.
	Repo string `json:"repo,omitempty"`
	// Error: kubelet cannot parse the reference (it never matches).
	Error string `json:"error,omitempty"`
	// Matches: indexes into Corpus.Patterns for which
	// credentialprovider.URLsMatchStr(pattern, Repo) is true.
	Matches []int `json:"matches"`
}

// Corpus is the generated pattern × image set with kubelet's verdicts.
type Corpus struct {
	Seed uint64 `json:"seed"`
	// Patterns kubelet's config validation accepts (ParseSchemelessURL).
	Patterns []string `json:"patterns"`
	// InvalidPatterns: generated patterns kubelet's validation rejects,
	// with kubelet's error.
	InvalidPatterns []InvalidPattern `json:"invalid_patterns"`
	Images          []Image          `json:"images"`
	Pairs           int              `json:"pairs"`
	MatchingPairs   int              `json:"matching_pairs"`
	// PatternErrors: pairs on which URLsMatchStr returned an error (a bad
	// glob): kubelet treats them as no match.
	PatternErrors int `json:"pattern_errors"`
}

// InvalidPattern is a generated matchImages entry kubelet rejects.
type InvalidPattern struct {
	Pattern string `json:"pattern"`
	Error   string `json:"error"`
}

type gen struct {
	r *rand.Rand
	// hosts is a small pool, so that patterns made from one image also
	// meet other images.
	hosts []string
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

var labels = []string{"registry", "example", "com", "io", "k8s", "gcr", "a", "b", "ab", "abc",
	"reg-1", "x", "us", "eu", "docker", "mirror", "net", "pkg", "dev", "r0", "z9"}

func (g *gen) host() string {
	if g.chance(0.04) {
		return "localhost"
	}
	if g.chance(0.03) {
		return g.pick("127.0.0.1", "10.0.0.7")
	}
	n := 2 + g.r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = g.pick(labels...)
	}
	return strings.Join(parts, ".")
}

func (g *gen) poolHost() string { return g.hosts[g.r.IntN(len(g.hosts))] }

func (g *gen) port() string {
	if g.chance(0.75) {
		return ""
	}
	return ":" + g.pick("5000", "443", "80", "8443", "5001")
}

var pathComponents = []string{"team", "team-b", "teamx", "library", "nginx", "app", "app_1", "a.b", "t", "team__b"}

func (g *gen) path() string {
	n := 1 + g.r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = g.pick(pathComponents...)
	}
	return "/" + strings.Join(parts, "/")
}

// image is a reference kubelet could be asked to pull: mostly already
// normalized, sometimes with a tag, a digest or Docker Hub short form.
func (g *gen) image() string {
	switch g.r.IntN(20) {
	case 0:
		return g.pick("nginx", "library/nginx", "team/app", "docker.io/team/app", "index.docker.io/library/nginx", "nginx:1.27")
	case 1:
		return g.poolHost() + g.port() + g.path() + ":v1.2"
	case 2:
		return g.poolHost() + g.port() + g.path() + "@sha256:" + strings.Repeat("ab", 32)
	default:
		return g.poolHost() + g.port() + g.path()
	}
}

// mutateLabel turns one host label into a glob (or leaves it).
func (g *gen) mutateLabel(l string) string {
	if l == "" {
		return l
	}
	i := g.r.IntN(len(l))
	c := string(l[i])
	switch g.r.IntN(22) {
	case 0, 1, 2:
		return "*"
	case 3:
		return l[:i] + "?" + l[i+1:]
	case 4:
		return l[:i] + "*"
	case 5:
		return "*" + l[i:]
	case 6:
		return l[:i] + "[a-c]" + l[i+1:]
	case 7:
		return l[:i] + "[^" + c + "]" + l[i+1:]
	case 8:
		return l[:i] + "[^x]" + l[i+1:]
	case 9:
		return l[:i] + "[" + c + "]" + l[i+1:]
	case 10:
		return l[:i] + `\` + c + l[i+1:]
	case 11:
		return l + `\`
	case 12:
		return l[:i] + "[" + c
	case 13:
		return l[:i] + "[!" + c + "]" + l[i+1:]
	case 14:
		return strings.ToUpper(l)
	case 15:
		return l[:i] + "%" + fmt.Sprintf("%02X", l[i]) + l[i+1:]
	case 16:
		return l[:i] + "[z-a]" + l[i+1:]
	case 17:
		return l[:i] + "[]" + c + "]" + l[i+1:]
	case 18:
		return "**"
	case 19:
		return l[:i] + "[a-" + l[i+1:]
	default:
		return l
	}
}

// badImage turns a generated image into a reference that is likely (not
// certain: kubelet's ParseImageName decides) to be unparsable, keeping its
// registry so that patterns made from the pool still meet it.
func (g *gen) badImage(from string) string {
	host, rest, found := strings.Cut(from, "/")
	if !found || !strings.ContainsAny(host, ".:") && host != "localhost" {
		host, rest = g.poolHost(), from
	}
	rest = strings.SplitN(strings.SplitN(rest, "@", 2)[0], ":", 2)[0]
	switch g.r.IntN(18) {
	case 0:
		return host + "/" + strings.ToUpper(rest[:1]) + rest[1:]
	case 1:
		return host + "//" + rest
	case 2:
		return host + "/" + rest + "/"
	case 3:
		return host + "/" + rest + ":"
	case 4:
		return host + "/" + rest + ":" + g.pick("-v1", ".v1", "v 1", "v1/x")
	case 5:
		return host + "/" + rest + ":" + strings.Repeat("v", 129)
	case 6:
		return host + "/" + rest + "@sha256:" + g.pick("abc", strings.Repeat("g", 64), strings.Repeat("ab", 31))
	case 7:
		return host + "/" + rest + "@md5:" + strings.Repeat("ab", 16)
	case 8:
		return host + "/" + g.pick("-", "_", ".", "__") + rest
	case 9:
		return host + "/" + rest + g.pick("___b", "--", ".", "-")
	case 10:
		return host + "/" + rest + " 1"
	case 11:
		return strings.Replace(host, ".", "_", 1) + "/" + rest
	case 12:
		return host + ":" + g.pick("50a", "", "-1") + "/" + rest
	case 13:
		return strings.Repeat("ab", 32)
	case 14:
		return host + "/" + rest + "/" + strings.Repeat("a", 255)
	case 15:
		return g.pick("", "@", ":", "/", "/"+rest)
	case 16:
		return host + "/" + rest + "@"
	default:
		return "-" + host + "/" + rest
	}
}

func (g *gen) pattern(from string) string {
	repo, _, _, err := parsers.ParseImageName(from)
	if err != nil {
		repo = from
	}
	hostport, path, _ := strings.Cut(repo, "/")
	path = "/" + path
	host, port := hostport, ""
	if j := strings.LastIndex(hostport, ":"); j >= 0 {
		host, port = hostport[:j], hostport[j:]
	}
	// Host labels.
	parts := strings.Split(host, ".")
	for k := range parts {
		if g.chance(0.3) {
			parts[k] = g.mutateLabel(parts[k])
		}
	}
	switch {
	case g.chance(0.05):
		parts = append([]string{"*"}, parts...)
	case g.chance(0.05) && len(parts) > 1:
		parts = parts[1:]
	}
	host = strings.Join(parts, ".")
	// Port.
	switch g.r.IntN(20) {
	case 0:
		port = ""
	case 1:
		port = ":5000"
	case 2:
		port = ":*"
	case 3:
		port = ":"
	case 4:
		port = ":05000"
	case 5:
		port = ":99999"
	case 6:
		port = ":50a"
	}
	// Path: none, a prefix, the whole path, or something else.
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch g.r.IntN(18) {
	case 0, 1, 2, 3, 12, 13, 14:
		path = ""
	case 4, 5:
		path = "/" + strings.Join(segs[:1+g.r.IntN(len(segs))], "/")
	case 6:
		path = "/" + segs[0][:max(1, len(segs[0])/2)]
	case 7:
		path = "/"
	case 8:
		path = path + "/"
	case 9:
		if len(segs[0]) > 1 {
			path = "/" + segs[0][:1] + "%" + fmt.Sprintf("%02x", segs[0][1]) + segs[0][2:]
		}
	case 10:
		path = "/" + g.pick("team%2Fb", "te am", "team%zz", "*", "t?am", "[a-z]eam", "team#frag", "team?q=1")
	case 11:
		path = "/" + strings.ToUpper(segs[0])
	}
	p := host + port + path
	// Userinfo, scheme, brackets, odd bytes.
	switch g.r.IntN(40) {
	case 0:
		p = "user@" + p
	case 1:
		p = "user:pass@" + p
	case 2:
		p = "https://" + p
	case 3:
		p = "[::1]" + port + path
	case 4:
		p = "[" + host + "]" + port
	case 5:
		p = host + " " + port
	case 6:
		p = host + "\t" + path
	case 7:
		p = host + "\x7f"
	case 8:
		p = "%zz" + host
	case 9:
		p = host + "%2e" + g.pick(labels...)
	case 10:
		p = "*"
	case 11:
		p = "*.*"
	case 12:
		p = "@" + host
	case 13:
		p = host + "#x"
	}
	return p
}

func runMatchCorpus(args []string) error {
	fs := flag.NewFlagSet("match-corpus", flag.ContinueOnError)
	out := fs.String("out", "", "output file (corpus JSON)")
	seed := fs.Uint64("seed", 4412, "random seed")
	nPatterns := fs.Int("patterns", 100, "valid patterns wanted")
	nImages := fs.Int("images", 300, "images wanted")
	nStrangers := fs.Int("stranger-images", 0, "valid images on registries of their own (no pattern is made from them: mostly unmatched), added after the others (their own random stream)")
	nBad := fs.Int("bad-images", 0, "images made unparsable, added after the others (their own random stream: the rest of the corpus does not change)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	g := &gen{r: rand.New(rand.NewPCG(*seed, 0x4b3))}
	for range 24 {
		g.hosts = append(g.hosts, g.host())
	}
	c := Corpus{Seed: *seed, Patterns: []string{}, InvalidPatterns: []InvalidPattern{}}
	images := make([]string, 0, *nImages)
	for len(images) < *nImages {
		images = append(images, g.image())
	}
	seen := map[string]bool{}
	for tries := 0; len(c.Patterns) < *nPatterns && tries < 100*(*nPatterns); tries++ {
		p := g.pattern(images[g.r.IntN(len(images))])
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := credentialprovider.ParseSchemelessURL(p); err != nil {
			c.InvalidPatterns = append(c.InvalidPatterns, InvalidPattern{Pattern: p, Error: err.Error()})
			continue
		}
		c.Patterns = append(c.Patterns, p)
	}
	bad := &gen{r: rand.New(rand.NewPCG(*seed, 0xbad)), hosts: g.hosts}
	for range min(*nBad, *nBad**nImages) {
		images = append(images, bad.badImage(images[bad.r.IntN(*nImages)]))
	}
	strangers := &gen{r: rand.New(rand.NewPCG(*seed, 0x5e7))}
	for range 24 {
		strangers.hosts = append(strangers.hosts, strangers.host())
	}
	for range *nStrangers {
		images = append(images, strangers.image())
	}
	for _, raw := range images {
		im := Image{Image: raw, Matches: []int{}}
		repo, _, _, err := parsers.ParseImageName(raw)
		if err != nil {
			im.Error = err.Error()
		} else {
			im.Repo = repo
			for i, p := range c.Patterns {
				c.Pairs++
				ok, err := credentialprovider.URLsMatchStr(p, repo)
				if err != nil {
					c.PatternErrors++
				}
				if ok {
					im.Matches = append(im.Matches, i)
					c.MatchingPairs++
				}
			}
		}
		c.Images = append(c.Images, im)
	}
	data, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}
