package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// links checks, in the repository at root, every relative link of every
// markdown file (the file exists; a #anchor names a heading of the target)
// and every mention of a markdown page with an anchor in the other files
// (Go code, scripts, the chart, example/: error messages and runbook_urls
// such as docs/user-guide/troubleshooting.md#etcdclusterdown).
func runLinks(args []string) error {
	fs := flag.NewFlagSet("links", flag.ExitOnError)
	root := fs.String("root", ".", "repository root")
	_ = fs.Parse(args)
	problems, err := checkLinks(*root)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d broken link(s)", len(problems))
	}
	return nil
}

var (
	mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// a page with an anchor named in code or configuration.
	pageRefRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.md)#([A-Za-z0-9_-]+)`)
	// a page of this repository named by its URL (a runbook_url).
	repoURLRE  = regexp.MustCompile(`github\.com/openetcd/etcd-operator/blob/[^/\s]+/([^\s#"'),]+\.md)(?:#([A-Za-z0-9_-]+))?`)
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	fenceRE    = regexp.MustCompile("^\\s*(```|~~~)")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

func trackedFiles(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" || strings.HasPrefix(f, "_output/") {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return files, nil
}

func checkLinks(root string) ([]string, error) {
	files, err := trackedFiles(root)
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		raw, err := os.ReadFile(filepath.Join(root, file))
		a := map[string]bool{}
		if err == nil {
			a = headingAnchors(string(raw))
		}
		anchors[file] = a
		return a
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, p))
		return err == nil
	}
	var problems []string
	check := func(from, target, anchor, what string) {
		if target != "" && !exists(target) {
			problems = append(problems, fmt.Sprintf("%s: %s: %s does not exist", from, what, target))
			return
		}
		if anchor == "" {
			return
		}
		if target == "" {
			target = from
		}
		if strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
			problems = append(problems, fmt.Sprintf("%s: %s: no heading #%s in %s", from, what, anchor, target))
		}
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || !isText(raw) {
			continue
		}
		text := string(raw)
		if strings.HasSuffix(f, ".md") {
			for _, l := range markdownLinks(text) {
				if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
					continue
				}
				target, anchor, _ := strings.Cut(l, "#")
				if target != "" {
					if strings.HasPrefix(target, "/") {
						problems = append(problems, fmt.Sprintf("%s: link %s: absolute paths do not resolve on every host; make it relative", f, l))
						continue
					}
					target = path.Clean(path.Join(path.Dir(f), target))
					if strings.HasPrefix(target, "../") {
						problems = append(problems, fmt.Sprintf("%s: link %s leaves the repository", f, l))
						continue
					}
				}
				check(f, target, anchor, "link "+l)
			}
			continue
		}
		// Other files name pages from the repository's root, or from their
		// own directory; this checker's own sources only show examples.
		if strings.HasPrefix(f, "hack/gen-docs/") {
			continue
		}
		for _, m := range repoURLRE.FindAllStringSubmatch(text, -1) {
			check(f, m[1], m[2], "URL of "+m[1]+"#"+m[2])
		}
		for _, m := range pageRefRE.FindAllStringSubmatch(text, -1) {
			page := m[1]
			if !exists(page) {
				// A path relative to the file itself (a chart's README).
				if rel := path.Join(path.Dir(f), page); exists(rel) {
					page = rel
				}
			}
			check(f, page, m[2], "mention "+m[1]+"#"+m[2])
		}
	}
	return problems, nil
}

func isText(b []byte) bool {
	n := min(len(b), 8000)
	for _, c := range b[:n] {
		if c == 0 {
			return false
		}
	}
	return true
}

// markdownLinks returns the targets of inline links outside code.
func markdownLinks(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = stripCodeSpans(line)
		for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors are the anchors GitHub makes of a page's headings.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if inFence {
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := count[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, markup and punctuation
// dropped, spaces made hyphens.
func slugify(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
