package failure

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

type codedError struct{ code string }

func (e codedError) Error() string     { return "api error " + e.code }
func (e codedError) ErrorCode() string { return e.code }

func TestIsPermanent(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil is not permanent", nil, false},
		{"a plain error may pass", errors.New("connection refused"), false},
		{"a marked error is permanent", Permanent(errors.New("no secret")), true},
		{"a marked error stays permanent when wrapped", fmt.Errorf("backup: %w", Permanent(errors.New("no secret"))), true},
		{"a missing bucket is permanent", fmt.Errorf("put s3://b/k: %w", codedError{"NoSuchBucket"}), true},
		{"refused credentials are permanent", codedError{"InvalidAccessKeyId"}, true},
		{"a wrong secret key is permanent", codedError{"SignatureDoesNotMatch"}, true},
		{"a denied access is permanent", codedError{"AccessDenied"}, true},
		{"a slow down from the store may pass", codedError{"SlowDown"}, false},
		{"an internal error of the store may pass", codedError{"InternalError"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsPermanent(tc.err); got != tc.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}

func TestIsRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		retry     bool
		permanent bool
	}{
		{"nil is no retry", nil, false, false},
		{"a plain error is not marked", errors.New("connection refused"), false, false},
		{"a marked error is a retry", Retry(errors.New("store unreachable")), true, false},
		{"a marked error stays a retry when wrapped", fmt.Errorf("restore: %w", Retry(errors.New("conflict"))), true, false},
		{"a permanent error is no retry", Permanent(errors.New("no secret")), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsRetry(tc.err); got != tc.retry {
				t.Errorf("IsRetry(%v) = %v, want %v", tc.err, got, tc.retry)
			}
			if got := IsPermanent(tc.err); got != tc.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", tc.err, got, tc.permanent)
			}
		})
	}
	if Retry(nil) != nil {
		t.Error("Retry(nil) is not nil")
	}
	if got := Retry(errors.New("store unreachable")).Error(); got != "store unreachable" {
		t.Errorf("Retry changed the message to %q", got)
	}
}

func TestBackoffDoublesUpToItsCapAndResets(t *testing.T) {
	b := Backoff{Min: time.Minute, Max: 5 * time.Minute}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	b.Reset()
	if d := b.Next(); d != time.Minute {
		t.Errorf("after Reset: %v, want %v", d, time.Minute)
	}
}

func TestBackoffNearTheLargestDurationDoesNotOverflow(t *testing.T) {
	b := Backoff{Min: time.Duration(1 << 61), Max: time.Duration(1<<63 - 1)}
	for range 4 {
		if d := b.Next(); d < b.Min {
			t.Fatalf("delay %v fell below Min: it overflowed", d)
		}
	}
}

func TestSafelyTurnsAPanicIntoAnErrorLoggedWithItsStack(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	err := Safely(logrus.NewEntry(logger), "the runner of ns/b", func() { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "the runner of ns/b panicked: boom") {
		t.Fatalf("err = %v", err)
	}
	e := hook.LastEntry()
	if e == nil || e.Level != logrus.ErrorLevel || e.Data["panic"] != "boom" || !strings.Contains(fmt.Sprint(e.Data["stack"]), "failure_test.go") {
		t.Errorf("log entry %+v, want an error with the panic and its stack", e)
	}
	if err := Safely(logrus.NewEntry(logger), "work", func() {}); err != nil {
		t.Errorf("err = %v for work that did not panic", err)
	}
}
