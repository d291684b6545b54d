package failure

import (
	"fmt"
	"runtime/debug"

	"github.com/sirupsen/logrus"
)

// Safely runs fn and turns a panic in it into an error, logged with its stack:
// a bug met by one object stops that object's work, never the operator, and
// every other object goes on. what names the work in the log and the error.
// The caller reports the error where the user looks (an event, a status) and
// decides whether and when the work starts again.
func Safely(log *logrus.Entry, what string, fn func()) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		err = fmt.Errorf("internal error: %s panicked: %v", what, r)
		log.WithFields(logrus.Fields{"panic": fmt.Sprint(r), "stack": string(debug.Stack())}).
			Errorf("%s panicked; the operator goes on", what)
	}()
	fn()
	return nil
}
