package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Restart starts a server that Stop ended again, on the same address, with the
// same credentials and data: the store coming back after an outage, as the
// operators (which keep its endpoint) see it.
func (s *S3Server) Restart(ctx context.Context) error {
	if s.cmd == nil {
		return errors.New("restart: the server was never started")
	}
	if s.cmd.ProcessState == nil {
		return errors.New("restart: the server is still running; Stop it first")
	}
	logf, err := os.OpenFile(s.LogFile, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== restarted at %s\n", time.Now().UTC().Format(time.RFC3339))
	cmd := exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("restart versitygw: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan error, 1)
	go func() { s.exited <- cmd.Wait(); logf.Close() }()
	return WaitFor(ctx, 30*time.Second, 200*time.Millisecond, "versitygw to answer again at "+s.Endpoint, func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-s.exited:
			out, _ := os.ReadFile(s.LogFile)
			return false, "", fmt.Errorf("versitygw exited (%v):\n%s", err, out)
		default:
		}
		if _, err := s.Client.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}
