package operatorrun

import (
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
)

// statusDroppedMessage is the one line logged when the apiserver drops status
// the operator writes.
const statusDroppedMessage = "the apiserver drops status this operator writes: the schema of a CRD of " +
	"etcd.database.coreos.com does not know it (a CRD made by hand for the original etcd-operator, or an older one), " +
	"so what the operator reports in status (phase, conditions, members, backups, restores) is lost"

// statusDroppedFix is what to do about it.
const statusDroppedFix = "install the CRDs of example/crd/ (kubectl apply -f example/crd/), " +
	"or let the operator install its own with -create-crd (the default), which replaces the definition"

// apiserverWarnings logs the apiserver's warnings (the Warning header) once
// each, as Warnings of the operator's log, where client-go's default handler
// logs every one through klog. Some come with every request of a kind:
// Kubernetes 1.33 and later warn on every request for Endpoints, which leader
// election reads or writes at every renewal (the original's lock), and a CRD
// whose schema does not know status warns `unknown field "status"` on every
// status write, that is every pass of every cluster. Those about status all
// have one cause, a CRD made for the original etcd-operator or an older one,
// so they make one line, which says what to do.
type apiserverWarnings struct {
	log  *logrus.Entry
	seen sync.Map
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *apiserverWarnings) HandleWarningHeader(code int, _, text string) {
	// 299 is the only code the apiserver sends and the only one client-go's
	// own handler logs.
	if code != 299 || text == "" {
		return
	}
	dropsStatus := strings.HasPrefix(text, `unknown field "status"`) || strings.HasPrefix(text, `unknown field "status.`)
	key := text
	if dropsStatus {
		key = statusDroppedMessage
	}
	if _, seen := w.seen.LoadOrStore(key, true); seen {
		return
	}
	if dropsStatus {
		w.log.WithFields(logrus.Fields{"warning": text, "fix": statusDroppedFix}).Warn(statusDroppedMessage)
		return
	}
	w.log.WithField("warning", text).Warn("apiserver warning: " + text)
}
