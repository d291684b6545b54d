// Package promutil registers the operators' Prometheus collectors, one way for
// the three binaries.
package promutil

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns the collector to use: c, or the
// identical one already registered, so that code that builds its metrics
// twice in one process (a controller made again after a lost leadership,
// tests) keeps counting into one series instead of panicking. A nil reg
// registers nothing; the collector still works. Any other failure is a
// programming error (a clashing name), hence the panic, as
// prometheus.MustRegister would.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("register metrics: %v", err))
}
