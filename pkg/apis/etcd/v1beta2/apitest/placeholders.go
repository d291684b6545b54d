package apitest

import "strings"

// Walkthrough is what the original's walkthroughs (doc/user/walkthrough/
// backup-operator.md and restore-operator.md) substitute with sed into the
// example backup and restore resources, whose placeholders are kept so that
// those pipelines still produce a working resource.
var Walkthrough = []struct{ Placeholder, Value string }{
	{"<full-s3-path>", "mybucket/etcd.backup"},
	{"<aws-secret>", "aws"},
	{"<etcd-cluster-endpoints>", `"http://example-etcd-cluster-client:2379"`},
}

// FillPlaceholders substitutes the walkthrough's values, as its sed does.
func FillPlaceholders(s string) string {
	for _, w := range Walkthrough {
		s = strings.ReplaceAll(s, w.Placeholder, w.Value)
	}
	return s
}
