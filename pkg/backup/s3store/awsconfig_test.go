package s3store

import (
	"strings"
	"testing"
)

func TestParseAWSSecret(t *testing.T) {
	const creds = "[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n"
	tests := []struct {
		name        string
		credentials string
		config      string
		noConfig    bool
		want        AWSProfile
		wantErr     []string
	}{
		{
			name:        "default profile in both files",
			credentials: creds,
			config:      "[default]\nregion = eu-west-1\n",
			want:        AWSProfile{Region: "eu-west-1"},
		},
		{
			name:        "config names the default profile [profile default]",
			credentials: creds,
			config:      "[profile default]\nregion=us-west-2\noutput = json\n",
			want:        AWSProfile{Region: "us-west-2"},
		},
		{
			name:        "session token, comments, odd spacing and upper-case keys",
			credentials: "# made by hand\n\n[ default ]\nAWS_ACCESS_KEY_ID=AKID\n\taws_secret_access_key =   SECRET   ; inline\naws_session_token = TOKEN/with+slash=\n",
			config:      "; config\n[default]\nregion = ap-south-1 # Mumbai\n",
			want:        AWSProfile{Region: "ap-south-1"},
		},
		{
			name:        "keys in config only, as the CLI allows",
			credentials: "",
			config:      "[default]\nregion = eu-central-1\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n",
			want:        AWSProfile{Region: "eu-central-1"},
		},
		{
			name:        "credentials file wins over config",
			credentials: creds,
			config:      "[default]\nregion = eu-central-1\naws_access_key_id = OTHER\naws_secret_access_key = OTHER\n",
			want:        AWSProfile{Region: "eu-central-1"},
		},
		{
			name:        "nested s3 block is skipped",
			credentials: creds,
			config:      "[default]\ns3 =\n  addressing_style = path\n  max_concurrent_requests = 4\nregion = sa-east-1\n",
			want:        AWSProfile{Region: "sa-east-1"},
		},
		{
			name:        "missing region is explained, not MissingRegion",
			credentials: creds,
			config:      "[default]\noutput = json\n",
			wantErr:     []string{"the AWS config in secret ns/aws has no region for profile default; add `region = ...`"},
		},
		{
			name:        "missing config key is pointed out",
			credentials: creds,
			noConfig:    true,
			wantErr:     []string{"has no region for profile default", `the secret has no "config" key`},
		},
		{
			name:        "region only in another profile",
			credentials: creds,
			config:      "[profile prod]\nregion = us-east-2\n",
			wantErr:     []string{"has no region for profile default", "[profile prod]"},
		},
		{
			name:        "credentials only in another profile",
			credentials: "[prod]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{"no aws_access_key_id and aws_secret_access_key for profile default", "[prod]"},
		},
		{
			name:        "secret key without key id",
			credentials: "[default]\naws_secret_access_key = SECRET\n",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{"aws_secret_access_key but no aws_access_key_id"},
		},
		{
			name:        "key id without secret key",
			credentials: "[default]\naws_access_key_id = AKID\n",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{"aws_access_key_id but no aws_secret_access_key"},
		},
		{
			name:        "garbage credentials",
			credentials: "[default]\nthis is not ini\n",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{`cannot parse its "credentials" file: line 2: neither a [section] nor key = value`},
		},
		{
			name:        "unclosed section",
			credentials: creds,
			config:      "[default\nregion = us-east-1\n",
			wantErr:     []string{`"config" file: line 1: section header without ']'`},
		},
		{
			name:        "key before any section",
			credentials: "aws_access_key_id = AKID\n",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{`line 1: key "aws_access_key_id" comes before any [section]`},
		},
		{
			name:        "binary junk",
			credentials: "\x00\x01\x02",
			config:      "[default]\nregion = us-east-1\n",
			wantErr:     []string{"cannot parse"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{SecretCredentialsKey: []byte(tc.credentials)}
			if !tc.noConfig {
				data[SecretConfigKey] = []byte(tc.config)
			}
			got, err := ParseAWSSecret("ns/aws", data)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, got %+v", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				for _, secret := range []string{"SECRET", "AKID"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q leaks a credential", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Region != tc.want.Region {
				t.Errorf("region %q, want %q", got.Region, tc.want.Region)
			}
			if got.Credentials.AccessKeyID != "AKID" || got.Credentials.SecretAccessKey != "SECRET" {
				t.Errorf("credentials %q/%q, want AKID/SECRET", got.Credentials.AccessKeyID, got.Credentials.SecretAccessKey)
			}
			wantToken := ""
			if strings.Contains(tc.credentials, "aws_session_token") {
				wantToken = "TOKEN/with+slash="
			}
			if got.Credentials.SessionToken != wantToken {
				t.Errorf("session token %q, want %q", got.Credentials.SessionToken, wantToken)
			}
		})
	}
}

func TestOSSRegion(t *testing.T) {
	tests := []struct {
		endpoint, want string
	}{
		{"http://oss-cn-hangzhou.aliyuncs.com", "oss-cn-hangzhou"},
		{"https://oss-cn-shanghai-internal.aliyuncs.com", "oss-cn-shanghai"},
		{"oss-eu-central-1.aliyuncs.com", "oss-eu-central-1"},
		{"https://s3.oss-ap-southeast-1.aliyuncs.com:443", "oss-ap-southeast-1"},
		{"https://backups.example.com", ""},
		{"http://oss-.aliyuncs.com", ""},
		{"://", ""},
	}
	for _, tc := range tests {
		got, err := OSSRegion(tc.endpoint)
		if tc.want == "" {
			if err == nil {
				t.Errorf("OSSRegion(%q) = %q, want an error", tc.endpoint, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("OSSRegion(%q) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
	}
}

func TestOSSConfigIsVirtualHosted(t *testing.T) {
	cfg, err := OSSConfig("http://oss-cn-hangzhou.aliyuncs.com", "bucket", "id", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ForcePathStyle || cfg.Region != "oss-cn-hangzhou" || cfg.Bucket != "bucket" ||
		cfg.Endpoint != "http://oss-cn-hangzhou.aliyuncs.com" || cfg.Credentials.AccessKeyID != "id" {
		t.Fatalf("OSSConfig = %+v", cfg)
	}
}
