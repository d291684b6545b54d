package manifests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/operatorrun"
)

// Both ways of building the image, the Dockerfile and hack/build-image.sh,
// and the release's plugin builds (hack/release.sh) stamp the binaries with
// the version and the commit, as `make build` does, so that -version and the
// startup log say what runs. The package path comes from the code, so moving
// the variables breaks this test rather than the stamp.
func TestEveryBuildPathStampsVersionAndCommit(t *testing.T) {
	pkg := reflect.TypeOf(operatorrun.Identity{}).PkgPath()
	for _, file := range []string{"Dockerfile", filepath.Join("hack", "build-image.sh"), filepath.Join("hack", "release.sh"), "Makefile"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), file))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"Version", "GitSHA"} {
			if want := "-X " + pkg + "." + v + "="; !strings.Contains(string(data), want) {
				t.Errorf("%s does not stamp %s (%q)", file, v, want)
			}
		}
	}
}
