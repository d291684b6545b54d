package main

import (
	"bytes"
	"testing"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"endpoints are required", nil, true},
		{"a list of endpoints", []string{"-endpoints", "http://a:2379, http://b:2379"}, false},
		{"no clients is refused", []string{"-endpoints", "http://a:2379", "-clients", "0"}, true},
		{"a zero duration is refused", []string{"-endpoints", "http://a:2379", "-duration", "0s"}, true},
		{"stray arguments are refused", []string{"-endpoints", "http://a:2379", "extra"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && len(o.cfg.Endpoints) != 2 {
				t.Errorf("endpoints %q, want 2", o.cfg.Endpoints)
			}
		})
	}
}

func TestRunWithBadFlagsExitsTwo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-clients", "3"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2 (stderr %q)", code, errOut.String())
	}
}
