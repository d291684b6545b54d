package operatorrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"
)

// Run is the skeleton of the three binaries: parse the flags, answer -help and
// -version, read the identity from the environment, then serve until ctx ends. It
// returns the exit code: 2 for bad flags, 1 when serving failed (lost leadership
// included, so that the Deployment restarts the process as a standby), else 0.
func Run(ctx context.Context, binary string, parse func() (printVersion bool, err error),
	getenv func(string) string, stdout io.Writer, log *logrus.Entry, serve func(context.Context, Identity) error) int {
	printVersion, err := parse()
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		log.WithError(err).Error("bad flags")
		return 2
	}
	if printVersion {
		_, _ = fmt.Fprintln(stdout, VersionString(binary))
		return 0
	}
	id, err := IdentityFromEnv(getenv)
	if err != nil {
		log.WithError(err).Error("cannot start")
		return 1
	}
	if err := serve(ctx, id); err != nil {
		log.WithError(err).Error("stopped on an error")
		return 1
	}
	log.Info("stopped")
	return 0
}
