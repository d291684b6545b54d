package checker

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The checker runs as a pod that has ended by the time anyone asks for its
// visualisation, and an ended pod cannot be copied from; its log can still be
// read. So the HTML travels in the log, gzipped and base64-encoded, in lines short
// enough that no container runtime splits them (CRI splits at 16 KiB).
const (
	// ArtifactLinePrefix starts each line of an artifact in a log.
	ArtifactLinePrefix = "ARTIFACT "
	// ArtifactEndPrefix ends an artifact; the rest of the line is its name.
	ArtifactEndPrefix = "ARTIFACT-END "
	artifactLineLen   = 4096
)

// WriteArtifact writes data to w as log lines that ReadArtifact finds again.
func WriteArtifact(w io.Writer, name string, data []byte) error {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	enc := base64.StdEncoding.EncodeToString(zipped.Bytes())
	bw := bufio.NewWriter(w)
	for len(enc) > 0 {
		n := min(len(enc), artifactLineLen)
		fmt.Fprintf(bw, "%s%s\n", ArtifactLinePrefix, enc[:n])
		enc = enc[n:]
	}
	fmt.Fprintf(bw, "%s%s\n", ArtifactEndPrefix, name)
	return bw.Flush()
}

// ErrNoArtifact: the log holds no complete artifact of that name.
var ErrNoArtifact = errors.New("no artifact in the log")

// ReadArtifact finds the artifact called name in a log that WriteArtifact wrote
// into, among other lines.
func ReadArtifact(log, name string) ([]byte, error) {
	var enc strings.Builder
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if rest, ok := strings.CutPrefix(line, ArtifactEndPrefix); ok {
			if rest != name {
				enc.Reset()
				continue
			}
			zipped, err := base64.StdEncoding.DecodeString(enc.String())
			if err != nil {
				return nil, fmt.Errorf("artifact %s: %w", name, err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(zipped))
			if err != nil {
				return nil, fmt.Errorf("artifact %s: %w", name, err)
			}
			data, err := io.ReadAll(zr)
			if err != nil {
				return nil, fmt.Errorf("artifact %s: %w", name, err)
			}
			return data, nil
		}
		if rest, ok := strings.CutPrefix(line, ArtifactLinePrefix); ok {
			enc.WriteString(rest)
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNoArtifact, name)
}
