package framework

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A store stopped and restarted answers again at the same endpoint with the
// same credentials and the objects it held; while stopped it answers nothing.
func TestS3ServerRestartKeepsAddressAndData(t *testing.T) {
	ctx := t.Context()
	srv, err := StartS3Server(ctx, "127.0.0.1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.CreateBucket(ctx, "bucket"); err != nil {
		t.Fatal(err)
	}
	_, err = srv.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k"), Body: bytes.NewReader([]byte("data"))},
		func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	if err != nil {
		t.Fatal(err)
	}
	endpoint := srv.Endpoint

	if err := srv.Restart(ctx); err == nil {
		t.Fatal("a running server was restarted")
	}
	srv.Stop()
	if _, err := srv.List(ctx, "bucket", ""); err == nil {
		t.Fatal("the stopped server still answers")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Endpoint != endpoint {
		t.Errorf("endpoint %s after the restart, was %s", srv.Endpoint, endpoint)
	}
	objs, err := srv.List(ctx, "bucket", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "k" || objs[0].Size != 4 {
		t.Errorf("after the restart the bucket holds %+v, want k of 4 bytes in bucket", objs)
	}
}
