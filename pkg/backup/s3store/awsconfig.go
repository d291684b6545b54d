package s3store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Keys of the AWS secret: the two files the AWS CLI keeps in ~/.aws.
const (
	SecretCredentialsKey = "credentials"
	SecretConfigKey      = "config"
)

// profileName is the only profile the operator reads, as the original did.
const profileName = "default"

// AWSProfile is what the operator needs from the AWS files in a secret.
type AWSProfile struct {
	Region      string
	Credentials aws.Credentials
}

// ParseAWSSecret reads profile default from the secret's `credentials` and `config`
// files, in memory: the original wrote them to temporary files for the SDK. Keys
// in `credentials` win over the same keys in `config`, as in the AWS CLI. Errors
// name the secret and the file and line, never a value, because they end up in the
// EtcdBackup's status.
func ParseAWSSecret(secretName string, data map[string][]byte) (AWSProfile, error) {
	creds, err := parseINI(data[SecretCredentialsKey])
	if err != nil {
		return AWSProfile{}, fmt.Errorf("secret %s: cannot parse its %q file: %w", secretName, SecretCredentialsKey, err)
	}
	conf, err := parseINI(data[SecretConfigKey])
	if err != nil {
		return AWSProfile{}, fmt.Errorf("secret %s: cannot parse its %q file: %w", secretName, SecretConfigKey, err)
	}
	// The config file names profiles "[profile x]", except that "[default]" may
	// appear either way; the credentials file uses bare names.
	fromConf := conf["profile "+profileName]
	if fromConf == nil {
		fromConf = conf[profileName]
	}
	fromCreds := creds[profileName]
	get := func(key string) string {
		if v := fromCreds[key]; v != "" {
			return v
		}
		return fromConf[key]
	}

	p := AWSProfile{
		Region: fromConf["region"],
		Credentials: aws.Credentials{
			AccessKeyID:     get("aws_access_key_id"),
			SecretAccessKey: get("aws_secret_access_key"),
			SessionToken:    get("aws_session_token"),
			Source:          "secret " + secretName,
		},
	}
	if p.Region == "" {
		msg := fmt.Sprintf("the AWS config in secret %s has no region for profile %s; add `region = ...` under [%s] in its %q key",
			secretName, profileName, profileName, SecretConfigKey)
		if _, ok := data[SecretConfigKey]; !ok {
			msg += fmt.Sprintf(" (the secret has no %q key)", SecretConfigKey)
		} else if others := profileNames(conf); len(others) > 0 {
			msg += fmt.Sprintf(" (it has only %s)", strings.Join(others, ", "))
		}
		return AWSProfile{}, errors.New(msg)
	}
	switch id, secret := p.Credentials.AccessKeyID, p.Credentials.SecretAccessKey; {
	case id == "" && secret == "":
		msg := fmt.Sprintf("the AWS credentials in secret %s have no aws_access_key_id and aws_secret_access_key for profile %s; add them under [%s] in its %q key",
			secretName, profileName, profileName, SecretCredentialsKey)
		if others := profileNames(creds); len(others) > 0 {
			msg += fmt.Sprintf(" (it has only %s)", strings.Join(others, ", "))
		}
		return AWSProfile{}, errors.New(msg)
	case id == "":
		return AWSProfile{}, fmt.Errorf("the AWS credentials in secret %s have aws_secret_access_key but no aws_access_key_id for profile %s", secretName, profileName)
	case secret == "":
		return AWSProfile{}, fmt.Errorf("the AWS credentials in secret %s have aws_access_key_id but no aws_secret_access_key for profile %s", secretName, profileName)
	}
	return p, nil
}

func profileNames(sections map[string]map[string]string) []string {
	var names []string
	for name := range sections {
		names = append(names, "["+name+"]")
	}
	sort.Strings(names)
	return names
}

// parseINI reads the subset of the AWS shared file format that holds credentials and
// a region: [sections], key = value, and # or ; comments. Nested blocks (a key with
// an empty value followed by indented lines, like "s3 =") are skipped. Keys are
// lower-cased, as the SDKs treat them case-insensitively.
func parseINI(data []byte) (map[string]map[string]string, error) {
	sections := map[string]map[string]string{}
	var current map[string]string
	nested := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		raw := sc.Text()
		text := strings.TrimSpace(raw)
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		if text == "" || text[0] == '#' || text[0] == ';' {
			continue
		}
		indented := raw[0] == ' ' || raw[0] == '\t'
		if nested && indented {
			continue
		}
		nested = false
		if text[0] == '[' {
			end := strings.IndexByte(text, ']')
			if end < 0 {
				return nil, fmt.Errorf("line %d: section header without ']'", line)
			}
			name := strings.Join(strings.Fields(text[1:end]), " ")
			if name == "" {
				return nil, fmt.Errorf("line %d: empty section name", line)
			}
			if sections[name] == nil {
				sections[name] = map[string]string{}
			}
			current = sections[name]
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: neither a [section] nor key = value", line)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		if key == "" {
			return nil, fmt.Errorf("line %d: empty key", line)
		}
		if current == nil {
			return nil, fmt.Errorf("line %d: key %q comes before any [section]", line, key)
		}
		value = stripComment(strings.TrimSpace(value))
		if value == "" {
			nested = true
		}
		current[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return sections, nil
}

// stripComment drops a trailing comment that follows whitespace; access keys and
// session tokens never contain whitespace, so this cannot cut a value short.
func stripComment(v string) string {
	for i := 1; i < len(v); i++ {
		if (v[i] == '#' || v[i] == ';') && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[:i])
		}
	}
	return v
}
