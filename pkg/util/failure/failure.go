// Package failure classifies errors as worth retrying or permanent, one way for
// the three binaries, and spaces retries. An error carries one of two marks:
// Permanent (retrying cannot fix it) or Retry (it is to be retried, and has
// been reported already).
//
// A permanent error is one that retrying fails the same way until a user acts:
// a wrong spec, a secret without the keys it needs, credentials the store
// refuses, a bucket that does not exist. Retrying it at the pace of a
// transient one only hammers the store (with a full snapshot stream, for a
// backup) and repeats the same report.
package failure

import (
	"errors"
	"slices"
	"time"
)

// permanentError marks a failure that only the user can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix. nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// retryError marks a failure to retry that has been reported already.
type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// Retry marks err as a failure that may pass, which the caller is to retry
// (a work queue with its backoff) and which has already been logged, written
// to status or sent as an event where the user sees it: whoever retries it
// says nothing more. nil stays nil.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return &retryError{err: err}
}

// IsRetry tells whether err, or an error it wraps, was marked Retry.
func IsRetry(err error) bool {
	var r *retryError
	return errors.As(err, &r)
}

// permanentStoreCodes are the error codes of S3 and S3-compatible stores
// (MinIO, OSS) that the store repeats until someone changes the credentials,
// the bucket or its policy.
var permanentStoreCodes = []string{
	"AccessDenied",
	"AccountProblem",
	"AllAccessDisabled",
	"InvalidAccessKeyId",
	"InvalidBucketName",
	"NoSuchBucket",
	"SignatureDoesNotMatch",
}

// IsPermanent tells whether err, or an error it wraps, was marked Permanent,
// or is an object store's answer that it will repeat. The store's errors are
// recognised by their code (the AWS SDK's smithy.APIError has ErrorCode), so
// that this package needs no store's SDK.
func IsPermanent(err error) bool {
	var p *permanentError
	if errors.As(err, &p) {
		return true
	}
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && slices.Contains(permanentStoreCodes, coded.ErrorCode())
}

// Backoff doubles from Min to Max: the delay before each retry of something
// that keeps failing. The zero value with Min and Max set is ready to use.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next is the delay before the next retry.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.Min
	case b.cur >= b.Max/2:
		b.cur = b.Max // doubling would pass Max, or overflow
	default:
		b.cur *= 2
	}
	return min(b.cur, b.Max)
}

// Reset starts over from Min, after a success.
func (b *Backoff) Reset() { b.cur = 0 }
