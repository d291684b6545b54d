package backuptest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// toolBinary finds a test server's binary: the path in $env, else the copy a
// hack script puts under the local tool cache (cached, relative to
// $XDG_CACHE_HOME or ~/.cache), else one named onPath on PATH (none when
// empty). howTo is added to every failure.
func toolBinary(env, cached, onPath, howTo string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w; %s", env, p, err, howTo)
		}
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	if p := filepath.Join(cache, cached); fileExists(p) {
		return p, nil
	}
	if onPath != "" {
		if p, err := exec.LookPath(onPath); err == nil {
			return p, nil
		}
	}
	return "", errors.New(filepath.Base(cached) + " not found; " + howTo)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startOnFreePort calls start with a fresh directory under dir for each try:
// the port a server is given is free when picked but may be taken before the
// server binds it, which it reports with inUse in its error.
func startOnFreePort[T any](dir, name, inUse string, start func(dir string) (T, error)) (T, error) {
	var lastErr error
	for attempt := range 5 {
		s, err := start(filepath.Join(dir, fmt.Sprintf("%s-%d", name, attempt)))
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), inUse) {
			break
		}
	}
	var zero T
	return zero, lastErr
}
