package v1beta2

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openetcd/etcd-operator/pkg/etcdversion"
)

// The same patterns are used by the CRD schemas (crd.go), so admission and the
// operators agree on what a valid spec is.
const (
	// RepositoryPattern is an image name without tag or digest; a registry port is allowed.
	RepositoryPattern = `^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$`
	// ImagePattern is an image reference with an optional tag or digest.
	ImagePattern = `^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`
	// ClusterDomainPattern is empty or a dot followed by a DNS name.
	ClusterDomainPattern = `^(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`
	// BucketPathPattern is "<bucket>/<key>" with both parts non-empty.
	BucketPathPattern = `^[^/]+/.+$`
	// BucketNamePattern is the bucket part of a path as GCS, Azure
	// containers and OSS accept it: no capitals, spaces, or dot or dash at
	// either end.
	BucketNamePattern = `^[a-z0-9]([a-z0-9._-]*[a-z0-9])?/`
	// S3BucketNamePattern also admits capitals: S3 buckets made in
	// us-east-1 before March 2018 may have them, and a backup running into
	// such a bucket must not start failing validation.
	S3BucketNamePattern = `^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?/`
	// BadKeyPattern finds what object stores refuse or rewrite in a key: an
	// empty, "." or ".." segment ("bucket/a/../b" is stored under another
	// name by S3-compatible servers that clean paths, refused by others) and
	// a trailing "/", which names a folder, not an object.
	BadKeyPattern = `//|/\.\.?(/|$)|/$`
	// ControlCharPattern finds control characters, which no store keeps in a key.
	ControlCharPattern = `[\x00-\x1f\x7f]`
)

var (
	repositoryRE    = regexp.MustCompile(RepositoryPattern)
	imageRE         = regexp.MustCompile(ImagePattern)
	clusterDomainRE = regexp.MustCompile(ClusterDomainPattern)
	bucketPathRE    = regexp.MustCompile(BucketPathPattern)
	bucketNameRE    = regexp.MustCompile(BucketNamePattern)
	s3BucketNameRE  = regexp.MustCompile(S3BucketNamePattern)
	badKeyRE        = regexp.MustCompile(BadKeyPattern)
	controlCharRE   = regexp.MustCompile(ControlCharPattern)
)

// ReservedEtcdEnv are the etcd settings a user may not give through
// pod.etcdEnv. The first ones the operator passes as flags: etcd refuses to
// start when a flag is also set through its ETCD_* variable, so a user value
// would only crash the member. The others decide a member's identity or how
// it joins: ETCD_FORCE_NEW_CLUSTER makes the first member restarted (by an
// upgrade, say) a one-member cluster of its own while the others exit, the
// discovery and proxy settings bootstrap against something other than the
// operator's --initial-cluster, a WAL directory outside the data volume is
// lost with the pod, a config file makes etcd ignore every flag, and without
// the strict reconfiguration check etcd accepts a membership change that
// loses quorum, and members that allow different numbers of learners (each
// checks the count as it applies an add) disagree on the membership. None of
// them can be repaired by the operator once in use.
var ReservedEtcdEnv = sets.New(
	"ETCD_NAME", "ETCD_DATA_DIR",
	"ETCD_INITIAL_CLUSTER", "ETCD_INITIAL_CLUSTER_STATE", "ETCD_INITIAL_CLUSTER_TOKEN",
	"ETCD_INITIAL_ADVERTISE_PEER_URLS", "ETCD_ADVERTISE_CLIENT_URLS",
	"ETCD_LISTEN_PEER_URLS", "ETCD_LISTEN_CLIENT_URLS", "ETCD_LISTEN_CLIENT_HTTP_URLS", "ETCD_LISTEN_METRICS_URLS",
	"ETCD_PEER_CLIENT_CERT_AUTH", "ETCD_PEER_TRUSTED_CA_FILE", "ETCD_PEER_CERT_FILE", "ETCD_PEER_KEY_FILE",
	"ETCD_CLIENT_CERT_AUTH", "ETCD_TRUSTED_CA_FILE", "ETCD_CERT_FILE", "ETCD_KEY_FILE",
	"ETCD_FORCE_NEW_CLUSTER", "ETCD_WAL_DIR", "ETCD_CONFIG_FILE", "ETCD_STRICT_RECONFIG_CHECK", "ETCD_PROXY",
	EnvMaxLearners, "ETCD_EXPERIMENTAL_MAX_LEARNERS",
)

// EnvMaxLearners is etcd 3.6's --max-learners: how many learners the
// membership may hold at once (etcd's default: one). The operator sets it on
// every member it makes; etcd before 3.6 warns about it and goes on.
const EnvMaxLearners = "ETCD_MAX_LEARNERS"

// MinNodeLostAfterSeconds is the least spec.pod.nodeLostAfterSeconds: a node
// that restarts, or whose kubelet restarts, is NotReady for a while without
// being lost.
const MinNodeLostAfterSeconds = 60

// ReservedEtcdEnvPrefix covers every discovery setting (ETCD_DISCOVERY,
// _SRV, _SRV_NAME, _FALLBACK, _PROXY, _TOKEN, _ENDPOINTS, ... of 3.6's v3
// discovery), including ones later etcd versions add.
const ReservedEtcdEnvPrefix = "ETCD_DISCOVERY"

// ReservedEtcdEnvMessage is the Go and schema message of a reserved variable.
const ReservedEtcdEnvMessage = "is reserved: the operator owns etcd's bootstrap, identity, membership, URL and TLS settings (see docs/user-guide/troubleshooting.md#reserved-podetcdenv-variables)"

// IsReservedEtcdEnv tells whether pod.etcdEnv may not set the variable.
func IsReservedEtcdEnv(name string) bool {
	return ReservedEtcdEnv.Has(name) || strings.HasPrefix(name, ReservedEtcdEnvPrefix)
}

// ReservedEtcdEnvIn lists the reserved variables of a cluster's
// pod.etcdEnv, in their order.
func (c *EtcdCluster) ReservedEtcdEnvIn() []string {
	if c.Spec.Pod == nil {
		return nil
	}
	var out []string
	for _, e := range c.Spec.Pod.EtcdEnv {
		if IsReservedEtcdEnv(e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

// WithoutReservedEtcdEnv returns a copy of the cluster whose pod.etcdEnv
// holds no reserved variable: what an operator runs when such a spec got
// past admission (a CRD older than the rule, --create-crd=false).
func (c *EtcdCluster) WithoutReservedEtcdEnv() *EtcdCluster {
	out := c.DeepCopy()
	if out.Spec.Pod != nil {
		out.Spec.Pod.EtcdEnv = FilterReservedEtcdEnv(out.Spec.Pod.EtcdEnv)
	}
	return out
}

// FilterReservedEtcdEnv returns env without its reserved variables.
func FilterReservedEtcdEnv(env []corev1.EnvVar) []corev1.EnvVar {
	if env == nil {
		return nil
	}
	out := make([]corev1.EnvVar, 0, len(env))
	for _, e := range env {
		if !IsReservedEtcdEnv(e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// Validate checks a cluster as the user wrote it (before defaults).
func (c *EtcdCluster) Validate() error {
	var errs field.ErrorList
	if len(c.Name) > MaxNameLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), c.Name, MaxNameLength))
	}
	errs = append(errs, c.Spec.validate(field.NewPath("spec"))...)
	errs = append(errs, c.refusedVersion()...)
	return errs.ToAggregate()
}

// refusedVersion refuses a spec.version of a patch release with a known
// defect that loses or corrupts data (etcdversion's refusals), unless the
// cluster runs it already: such a cluster is still run and repaired, and
// moved off it by a spec.version edit, rather than left alone.
func (c *EtcdCluster) refusedVersion() field.ErrorList {
	v, err := etcdversion.Parse(c.WithDefaults().Spec.Version)
	if err != nil {
		return nil
	}
	why := v.RefusedBecause()
	if why == "" || etcdversion.Normalize(c.Status.CurrentVersion) == v.String() {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "version"),
		fmt.Sprintf("etcd %s is refused for new clusters and version changes: %s; choose a later patch release", v, why))}
}

// Why a change of spec.TLS of an existing cluster is refused. TLS is
// switched on or off in a running cluster for peers and clients together;
// the operator finds the secrets of issued TLS by the cluster's name while
// members still use them, not those static TLS named.
const (
	TLSSwitchedOnPartlyMessage        = "TLS switched on in a running cluster covers peers and clients: give issued, or static with member.peerSecret, member.serverSecret and operatorSecret"
	StaticTLSSwitchedOffMessage       = "static TLS cannot be switched off in a running cluster (only issued TLS can): the members use the secrets it names until each one has moved"
	TLSOfPeersOrClientsChangedMessage = "TLS of peers alone or of clients alone cannot be changed in a running cluster: switch TLS off and on again, or make a new cluster"
)

// ValidateUpdate checks a spec change of a cluster that already exists.
func (c *EtcdCluster) ValidateUpdate(old *EtcdCluster) error {
	if err := c.Validate(); err != nil {
		return err
	}
	var errs field.ErrorList
	tlsPath := field.NewPath("spec", "TLS")
	oldMode, newMode := old.Spec.TLS.Mode(), c.Spec.TLS.Mode()
	switch {
	case oldMode == "" && newMode != "":
		// Switched on member by member (the operator's TLS switch), which
		// goes through stages of peers and clients together.
		if !c.Spec.TLS.IsSecurePeer() || !c.Spec.TLS.IsSecureClient() {
			errs = append(errs, field.Forbidden(tlsPath, TLSSwitchedOnPartlyMessage))
		}
	case oldMode != "" && newMode == "":
		if oldMode != "issued" {
			errs = append(errs, field.Forbidden(tlsPath, StaticTLSSwitchedOffMessage))
		}
	case c.Spec.TLS.IsSecurePeer() != old.Spec.TLS.IsSecurePeer() ||
		c.Spec.TLS.IsSecureClient() != old.Spec.TLS.IsSecureClient():
		errs = append(errs, field.Forbidden(tlsPath, TLSOfPeersOrClientsChangedMessage))
	}
	// The members' certificates stay those of the mode they started with:
	// issued certificates are not renewed from another CA, nor replaced by
	// the user's, in place yet.
	if oldMode != "" && newMode != "" && c.Spec.TLS.IsIssued() != old.Spec.TLS.IsIssued() {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "TLS"),
			"TLS cannot be switched between static and issued for an existing cluster"))
	} else if c.Spec.TLS.IsIssued() && old.Spec.TLS.IsIssued() && c.Spec.TLS.FromCertManager() != old.Spec.TLS.FromCertManager() {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "TLS", "issued", "issuerRef"),
			IssuerSwitchedMessage))
	} else if c.Spec.TLS.IsIssued() && old.Spec.TLS.IsIssued() && c.Spec.TLS.Secrets(c.Name).CA != old.Spec.TLS.Secrets(old.Name).CA {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "TLS", "issued", "caSecret"),
			"the CA of an existing cluster cannot be changed: its members' certificates were issued by the one it has"))
	}
	return errs.ToAggregate()
}

func (s *ClusterSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Size < MinClusterSize || s.Size > MaxClusterSize {
		errs = append(errs, field.Invalid(p.Child("size"), s.Size,
			fmt.Sprintf("must be between %d and %d", MinClusterSize, MaxClusterSize)))
	}
	if s.Repository != "" && !repositoryRE.MatchString(s.Repository) {
		errs = append(errs, field.Invalid(p.Child("repository"), s.Repository,
			"must be an image repository without tag or digest, like quay.io/coreos/etcd"))
	}
	if s.Version != "" {
		errs = append(errs, validateVersion(p.Child("version"), s.Version)...)
	}
	if s.Pod != nil {
		errs = append(errs, s.Pod.validate(p.Child("pod"))...)
	}
	if s.TLS != nil {
		errs = append(errs, s.TLS.validate(p.Child("TLS"))...)
	}
	if s.Maintenance != nil {
		errs = append(errs, s.Maintenance.validate(p.Child("maintenance"), s)...)
	}
	if s.DisasterRecovery != nil {
		errs = append(errs, s.DisasterRecovery.validate(p.Child("disasterRecovery"))...)
	}
	if b := s.Bootstrap; b != nil && b.Mode != "" && b.Mode != BootstrapSeedAndJoin && b.Mode != BootstrapTogether {
		errs = append(errs, field.NotSupported(p.Child("bootstrap", "mode"), b.Mode, []string{string(BootstrapSeedAndJoin), string(BootstrapTogether)}))
	}
	return errs
}

func validateVersion(p *field.Path, v string) field.ErrorList {
	ev, err := etcdversion.Parse(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, "must be an etcd version like 3.5.21")}
	}
	if !ev.Supported() {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("only etcd %s and later %d.x versions are supported", etcdversion.Oldest().MinorString(), etcdversion.Oldest().Major))}
	}
	return nil
}

func (pp *PodPolicy) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range pp.Labels {
		if k == LabelApp || strings.HasPrefix(k, "etcd_") {
			errs = append(errs, field.Invalid(p.Child("labels").Key(k), k,
				`label is reserved by the operator ("app" and "etcd_*")`))
			continue
		}
		errs = append(errs, validateLabel(p.Child("labels").Key(k), k, v)...)
	}
	for k, v := range pp.NodeSelector {
		errs = append(errs, validateLabel(p.Child("nodeSelector").Key(k), k, v)...)
	}
	if _, ok := pp.Annotations[AnnotationVersion]; ok {
		errs = append(errs, field.Invalid(p.Child("annotations").Key(AnnotationVersion), AnnotationVersion,
			"annotation is reserved by the operator: it records the member's etcd version"))
	}
	errs = append(errs, apivalidation.ValidateAnnotations(pp.Annotations, p.Child("annotations"))...)
	if pp.BusyboxImage != "" && !imageRE.MatchString(pp.BusyboxImage) {
		errs = append(errs, field.Invalid(p.Child("busyboxImage"), pp.BusyboxImage, "must be an image reference"))
	}
	if pp.DNSTimeoutInSecond < 0 {
		errs = append(errs, field.Invalid(p.Child("DNSTimeoutInSecond"), pp.DNSTimeoutInSecond,
			"must be 0 (wait forever) or a positive number of seconds"))
	}
	if pp.NodeLostAfterSeconds != 0 && pp.NodeLostAfterSeconds < MinNodeLostAfterSeconds {
		errs = append(errs, field.Invalid(p.Child("nodeLostAfterSeconds"), pp.NodeLostAfterSeconds,
			fmt.Sprintf("must be 0 (only a deleted Node counts as lost) or at least %d seconds: a node that restarts is NotReady for a while too", MinNodeLostAfterSeconds)))
	}
	if !clusterDomainRE.MatchString(pp.ClusterDomain) {
		errs = append(errs, field.Invalid(p.Child("ClusterDomain"), pp.ClusterDomain,
			"must be empty or a DNS suffix starting with a dot, like .cluster.local"))
	}
	errs = append(errs, validateEnv(p.Child("etcdEnv"), pp.EtcdEnv)...)
	errs = append(errs, validateResources(p.Child("resources"), pp.Resources)...)
	errs = append(errs, validateTolerations(p.Child("tolerations"), pp.Tolerations)...)
	if pp.PersistentVolumeClaimSpec != nil {
		errs = append(errs, validatePVCSpec(p.Child("persistentVolumeClaimSpec"), pp.PersistentVolumeClaimSpec)...)
	}
	if sc := pp.SecurityContext; sc != nil {
		for name, id := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup, "fsGroup": sc.FSGroup} {
			if id != nil && *id < 0 {
				errs = append(errs, field.Invalid(p.Child("securityContext", name), *id, "must not be negative"))
			}
		}
	}
	return errs
}

func validateLabel(p *field.Path, k, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	for _, msg := range validation.IsValidLabelValue(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validateEnv(p *field.Path, env []corev1.EnvVar) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, e := range env {
		ep := p.Index(i).Child("name")
		switch {
		case e.Name == "":
			errs = append(errs, field.Required(ep, "every variable needs a name"))
		case len(validation.IsEnvVarName(e.Name)) > 0:
			errs = append(errs, field.Invalid(ep, e.Name, strings.Join(validation.IsEnvVarName(e.Name), "; ")))
		case IsReservedEtcdEnv(e.Name):
			errs = append(errs, field.Invalid(ep, e.Name, ReservedEtcdEnvMessage))
		case seen.Has(e.Name):
			errs = append(errs, field.Duplicate(ep, e.Name))
		}
		seen.Insert(e.Name)
	}
	return errs
}

func validateResources(p *field.Path, r corev1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), q.String(), "must not be negative"))
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), q.String(),
				"must be less than or equal to the "+string(name)+" limit "+limit.String()))
		}
	}
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

func validateTolerations(p *field.Path, ts []corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		tp := p.Index(i)
		switch t.Operator {
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, "must be empty when operator is Exists"))
			}
		case corev1.TolerationOpEqual, "":
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	return errs
}

func validatePVCSpec(p *field.Path, s *corev1.PersistentVolumeClaimSpec) field.ErrorList {
	var errs field.ErrorList
	storage, ok := s.Resources.Requests[corev1.ResourceStorage]
	if !ok || storage.Sign() <= 0 {
		errs = append(errs, field.Required(p.Child("resources", "requests", "storage"),
			"every member's volume needs a positive storage request, like 1Gi"))
	}
	for i, m := range s.AccessModes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadWriteMany:
		default:
			errs = append(errs, field.NotSupported(p.Child("accessModes").Index(i), m,
				[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadWriteMany}))
		}
	}
	if sc := s.StorageClassName; sc != nil && *sc != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*sc) {
			errs = append(errs, field.Invalid(p.Child("storageClassName"), *sc, msg))
		}
	}
	return errs
}

// IssuerSwitchedMessage refuses moving an existing cluster between the
// operator's own CA and a cert-manager issuer: the members' certificates
// would come from another CA, which they do not trust.
const IssuerSwitchedMessage = "an existing cluster cannot move between the operator's own CA and a cert-manager issuer: its members trust the CA that issued their certificates"

func (r *IssuerReference) validate(p *field.Path, withCASecret bool) field.ErrorList {
	var errs field.ErrorList
	if withCASecret {
		errs = append(errs, field.Forbidden(p, "issuerRef and caSecret exclude each other: the certificates come either from a cert-manager issuer or from the operator's own CA"))
	}
	if r.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "the name of the cert-manager Issuer or ClusterIssuer"))
	} else {
		errs = append(errs, validateSecretName(p.Child("name"), r.Name)...)
	}
	if d := r.WithDefaults(); d.Group == CertManagerGroup && d.Kind != IssuerKind && d.Kind != ClusterIssuerKind {
		errs = append(errs, field.NotSupported(p.Child("kind"), r.Kind, []string{IssuerKind, ClusterIssuerKind}))
	}
	return errs
}

func (tp *TLSPolicy) validate(p *field.Path) field.ErrorList {
	if it := tp.Issued; it != nil {
		if tp.Static != nil {
			return field.ErrorList{field.Forbidden(p.Child("issued"),
				"static and issued exclude each other: either the user's secrets or the operator's certificates")}
		}
		ip := p.Child("issued")
		errs := validateSecretName(ip.Child("caSecret"), it.CASecret)
		if ref := it.IssuerRef; ref != nil {
			errs = append(errs, ref.validate(ip.Child("issuerRef"), it.CASecret != "")...)
		}
		if v := it.CertificateValidity; v != nil && v.Duration != 0 &&
			(v.Duration < MinCertificateValidity || v.Duration > MaxCertificateValidity) {
			errs = append(errs, field.Invalid(ip.Child("certificateValidity"), v.Duration.String(),
				CertificateValidityRange))
		}
		return errs
	}
	st := tp.Static
	if st == nil {
		return nil
	}
	sp := p.Child("static")
	var errs field.ErrorList
	serverSecret, peerSecret := "", ""
	if st.Member != nil {
		serverSecret, peerSecret = st.Member.ServerSecret, st.Member.PeerSecret
	}
	// The operator can only talk to https members with its own client certificate,
	// and a client certificate is useless against http members.
	if st.OperatorSecret != "" && serverSecret == "" {
		errs = append(errs, field.Required(sp.Child("member", "serverSecret"),
			"operatorSecret is set, so members need a serverSecret to serve clients over https"))
	}
	if serverSecret != "" && st.OperatorSecret == "" {
		errs = append(errs, field.Required(sp.Child("operatorSecret"),
			"member.serverSecret is set, so the operator needs a client certificate to reach members"))
	}
	for name, v := range map[string]string{"operatorSecret": st.OperatorSecret} {
		errs = append(errs, validateSecretName(sp.Child(name), v)...)
	}
	errs = append(errs, validateSecretName(sp.Child("member", "serverSecret"), serverSecret)...)
	errs = append(errs, validateSecretName(sp.Child("member", "peerSecret"), peerSecret)...)
	return errs
}

func validateSecretName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// Validate checks a backup spec. Storage types the schema accepts but the operator
// cannot write yet are reported by the backup operator, not here.
func (s *BackupSpec) Validate() error {
	p := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateTarget(p, s)...)
	for i, ep := range s.EtcdEndpoints {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			errs = append(errs, field.Invalid(p.Child("etcdEndpoints").Index(i), ep,
				"must be a client URL like http://example-etcd-cluster-client:2379"))
		}
	}
	if pol := s.BackupPolicy; pol != nil {
		pp := p.Child("backupPolicy")
		switch {
		case pol.TimeoutInSecond < 0:
			errs = append(errs, field.Invalid(pp.Child("timeoutInSecond"), pol.TimeoutInSecond, "must not be negative"))
		case pol.TimeoutInSecond > MaxBackupTimeoutInSecond:
			errs = append(errs, field.Invalid(pp.Child("timeoutInSecond"), pol.TimeoutInSecond,
				fmt.Sprintf("must be at most %d (a day)", MaxBackupTimeoutInSecond)))
		}
		switch {
		case pol.BackupIntervalInSecond < 0:
			errs = append(errs, field.Invalid(pp.Child("backupIntervalInSecond"), pol.BackupIntervalInSecond, "must not be negative"))
		case pol.BackupIntervalInSecond > MaxBackupIntervalInSecond:
			errs = append(errs, field.Invalid(pp.Child("backupIntervalInSecond"), pol.BackupIntervalInSecond,
				fmt.Sprintf("must be at most %d (a year)", MaxBackupIntervalInSecond)))
		}
		if pol.MaxBackups < 0 {
			errs = append(errs, field.Invalid(pp.Child("maxBackups"), pol.MaxBackups, "must not be negative"))
		}
		errs = append(errs, pol.validateSchedule(pp)...)
		errs = append(errs, pol.validateArchive(pp, s.IsPeriodic())...)
	}
	errs = append(errs, s.Verify.validate(p.Child("verify"))...)
	errs = append(errs, validateSecretName(p.Child("clientTLSSecret"), s.ClientTLSSecret)...)
	errs = append(errs, validateCodec(p, s.Compression, s.Encryption)...)
	errs = append(errs, validateSource(p, s.StorageType, s.BackupSource.stores())...)
	return errs.ToAggregate()
}

// Validate checks a restore. The restored cluster keeps the restore's name, so the
// two must agree.
func (r *EtcdRestore) Validate() error {
	p := field.NewPath("spec")
	var errs field.ErrorList
	s := &r.Spec
	switch {
	case s.EtcdCluster.Name == "":
		errs = append(errs, field.Required(p.Child("etcdCluster", "name"), "names the EtcdCluster to restore"))
	case s.EtcdCluster.Name != r.Name:
		errs = append(errs, field.Invalid(p.Child("etcdCluster", "name"), s.EtcdCluster.Name,
			fmt.Sprintf("must equal the EtcdRestore's name %q: the restored cluster keeps that name", r.Name)))
	}
	errs = append(errs, validateEncryption(p, s.Encryption)...)
	errs = append(errs, validateSource(p, s.BackupStorageType, s.RestoreSource.stores())...)
	errs = append(errs, s.PointInTime.validate(p.Child("pointInTime"))...)
	return errs.ToAggregate()
}

// Messages of spec.pointInTime's rules, shared with the CRD schema.
const (
	PointInTimeOneOfMessage    = "names one of a time, a revision or latest"
	PointInTimeRequiredMessage = "names the time, the revision or latest to restore to (or remove pointInTime to restore the snapshot the path names)"
	PointInTimeTimeMessage     = `must be an RFC 3339 time, such as "2026-11-28T14:32:10Z" or "2026-11-28T15:32:10.5+01:00"`
)

// validate checks spec.pointInTime; nil is a restore of the snapshot itself.
func (pt *RestorePointInTime) validate(p *field.Path) field.ErrorList {
	if pt == nil {
		return nil
	}
	var errs field.ErrorList
	named := 0
	for _, set := range []bool{pt.Time != "", pt.Revision != 0, pt.Latest} {
		if set {
			named++
		}
	}
	switch {
	case named > 1:
		errs = append(errs, field.Invalid(p, pt.String(), PointInTimeOneOfMessage))
	case named == 0:
		errs = append(errs, field.Required(p, PointInTimeRequiredMessage))
	}
	if pt.Revision < 0 {
		errs = append(errs, field.Invalid(p.Child("revision"), pt.Revision, "must be greater than or equal to 0"))
	}
	if _, err := pt.ParsedTime(); err != nil {
		errs = append(errs, field.Invalid(p.Child("time"), pt.Time, PointInTimeTimeMessage))
	}
	return errs
}

// storeRef is the path, credentials and endpoint of one storage source.
type storeRef struct {
	path, secret string
	source       CredentialSource
	endpoint     string
	// region is S3's; only the operator's identity takes one from the spec.
	region string
}

func (b *BackupSource) stores() map[BackupStorageType]storeRef {
	refs := map[BackupStorageType]storeRef{}
	if b.S3 != nil {
		refs[BackupStorageTypeS3] = storeRef{b.S3.Path, b.S3.AWSSecret, b.S3.CredentialSource, b.S3.Endpoint, b.S3.Region}
	}
	if b.OSS != nil {
		refs[BackupStorageTypeOSS] = storeRef{path: b.OSS.Path, secret: b.OSS.OSSSecret}
	}
	if b.ABS != nil {
		refs[BackupStorageTypeABS] = storeRef{b.ABS.Path, b.ABS.ABSSecret, b.ABS.CredentialSource, b.ABS.Endpoint, ""}
	}
	if b.GCS != nil {
		refs[BackupStorageTypeGCS] = storeRef{b.GCS.Path, b.GCS.GCPSecret, b.GCS.CredentialSource, b.GCS.Endpoint, ""}
	}
	return refs
}

func (r *RestoreSource) stores() map[BackupStorageType]storeRef {
	refs := map[BackupStorageType]storeRef{}
	if r.S3 != nil {
		refs[BackupStorageTypeS3] = storeRef{r.S3.Path, r.S3.AWSSecret, r.S3.CredentialSource, r.S3.Endpoint, r.S3.Region}
	}
	if r.OSS != nil {
		refs[BackupStorageTypeOSS] = storeRef{path: r.OSS.Path, secret: r.OSS.OSSSecret}
	}
	if r.ABS != nil {
		refs[BackupStorageTypeABS] = storeRef{r.ABS.Path, r.ABS.ABSSecret, r.ABS.CredentialSource, r.ABS.Endpoint, ""}
	}
	if r.GCS != nil {
		refs[BackupStorageTypeGCS] = storeRef{r.GCS.Path, r.GCS.GCPSecret, r.GCS.CredentialSource, r.GCS.Endpoint, ""}
	}
	return refs
}

// sourceFields is the JSON key of each source and of its secret.
var sourceFields = map[BackupStorageType][2]string{
	BackupStorageTypeS3:  {"s3", "awsSecret"},
	BackupStorageTypeOSS: {"oss", "ossSecret"},
	BackupStorageTypeABS: {"abs", "absSecret"},
	BackupStorageTypeGCS: {"gcs", "gcpSecret"},
}

// Messages of the credential rules, shared with the CRD schema.
const (
	SecretAndIdentityMessage = "a source names either its secret or credentialSource OperatorServiceAccount, not both: " +
		"one of the two would be ignored"
	ABSIdentityEndpointMessage = "credentialSource OperatorServiceAccount needs the account's blob service URL in endpoint, " +
		"e.g. https://<account>.blob.core.windows.net"
	RegionWithSecretMessage = "region is taken with credentialSource OperatorServiceAccount only: " +
		"with awsSecret the region is the one its config file names"
	// RegionPattern is an AWS region name such as eu-west-1 (S3-compatible
	// stores take other names, such as MinIO's default us-east-1 or a bare word).
	RegionPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
)

var regionRE = regexp.MustCompile(RegionPattern)

func validateSource(p *field.Path, t BackupStorageType, stores map[BackupStorageType]storeRef) field.ErrorList {
	keys, known := sourceFields[t]
	if !known {
		return field.ErrorList{field.NotSupported(p.Child("storageType"), t,
			[]BackupStorageType{BackupStorageTypeS3, BackupStorageTypeABS, BackupStorageTypeGCS, BackupStorageTypeOSS})}
	}
	key, secretKey := keys[0], keys[1]
	ref, ok := stores[t]
	if !ok {
		return field.ErrorList{field.Required(p.Child(key), fmt.Sprintf("storage type %s needs spec.%s", t, key))}
	}
	var errs field.ErrorList
	errs = append(errs, validateBucketPath(p.Child(key, "path"), ref.path, t == BackupStorageTypeS3)...)
	switch ref.source {
	case CredentialSourceOperatorServiceAccount:
		if ref.secret != "" {
			errs = append(errs, field.Invalid(p.Child(key, secretKey), ref.secret, SecretAndIdentityMessage))
		}
		if t == BackupStorageTypeABS && ref.endpoint == "" {
			errs = append(errs, field.Required(p.Child(key, "endpoint"), ABSIdentityEndpointMessage))
		}
		if ref.region != "" && !regionRE.MatchString(ref.region) {
			errs = append(errs, field.Invalid(p.Child(key, "region"), ref.region, "must be a region name such as eu-west-1"))
		}
		return errs
	case "", CredentialSourceSecret:
		if ref.region != "" {
			errs = append(errs, field.Invalid(p.Child(key, "region"), ref.region, RegionWithSecretMessage))
		}
	default:
		return append(errs, field.NotSupported(p.Child(key, "credentialSource"), ref.source,
			[]CredentialSource{CredentialSourceSecret, CredentialSourceOperatorServiceAccount}))
	}
	// GCS alone may fall back to the workload's default credentials, as in the
	// original, unless the source asks for its secret and nothing else.
	if ref.secret == "" && (t != BackupStorageTypeGCS || ref.source == CredentialSourceSecret) {
		msg := "names the secret holding the store's credentials"
		if t != BackupStorageTypeOSS {
			msg += "; without one, credentialSource: OperatorServiceAccount uses the operator's own cloud identity where it lends it"
		}
		errs = append(errs, field.Required(p.Child(key, secretKey), msg))
	}
	errs = append(errs, validateSecretName(p.Child(key, secretKey), ref.secret)...)
	return errs
}

// Messages of the path rules, shared with the CRD schema.
const (
	BucketPathMessage   = `must be "<bucket>/<key>"`
	BucketNameMessage   = "the bucket (before the first /) must be a bucket name: lowercase letters, digits, '.', '-' and '_', starting and ending with a letter or digit"
	S3BucketNameMessage = "the bucket (before the first /) must be a bucket name: letters, digits, '.', '-' and '_', starting and ending with a letter or digit"
	BadKeyMessage       = `the key (after the first /) may not have empty, "." or ".." segments nor end in "/": stores refuse such keys or store the object under another name`
	ControlCharMessage  = "must not contain control characters"
)

// validateBucketPath checks a backup path the way stores will: a path they
// refuse is refused here, rather than failing every backup with a full
// snapshot stream each time.
func validateBucketPath(p *field.Path, path string, s3 bool) field.ErrorList {
	switch {
	case !bucketPathRE.MatchString(path):
		return field.ErrorList{field.Invalid(p, path, BucketPathMessage)}
	case s3 && !s3BucketNameRE.MatchString(path):
		return field.ErrorList{field.Invalid(p, path, S3BucketNameMessage)}
	case !s3 && !bucketNameRE.MatchString(path):
		return field.ErrorList{field.Invalid(p, path, BucketNameMessage)}
	case badKeyRE.MatchString(path):
		return field.ErrorList{field.Invalid(p, path, BadKeyMessage)}
	case controlCharRE.MatchString(path):
		return field.ErrorList{field.Invalid(p, path, ControlCharMessage)}
	}
	return nil
}

// Environment variables of the etcd flags the maintenance settings become.
// etcd refuses to start when a flag is also set through its variable, so a
// setting written in spec.maintenance may not also be given in pod.etcdEnv.
const (
	EnvQuota                   = "ETCD_QUOTA_BACKEND_BYTES"
	EnvAutoCompactionMode      = "ETCD_AUTO_COMPACTION_MODE"
	EnvAutoCompactionRetention = "ETCD_AUTO_COMPACTION_RETENTION"
	EnvInitialCorruptCheck     = "ETCD_EXPERIMENTAL_INITIAL_CORRUPT_CHECK"
	EnvCorruptCheckTime        = "ETCD_EXPERIMENTAL_CORRUPT_CHECK_TIME"
	EnvCorruptCheckTime36      = "ETCD_CORRUPT_CHECK_TIME"
	EnvCompactHashCheck        = "ETCD_EXPERIMENTAL_COMPACT_HASH_CHECK_ENABLED"
	EnvFeatureGates            = "ETCD_FEATURE_GATES"

	// MaxDefragScheduleLength bounds the cron schedule (and its CEL rule).
	MaxDefragScheduleLength = 128
)

// AutoCompactionRetentionPattern is a retention as etcd accepts it: a whole
// number (hours in periodic mode, revisions in revision mode) or, in periodic
// mode, a Go duration such as "90m" or "1h30m".
const AutoCompactionRetentionPattern = `^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// DurationPattern is a Go duration such as "4h" or "90m".
const DurationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

var (
	retentionRE = regexp.MustCompile(AutoCompactionRetentionPattern)
	wholeRE     = regexp.MustCompile(`^[0-9]+$`)
)

func (m *MaintenancePolicy) validate(p *field.Path, spec *ClusterSpec) field.ErrorList {
	var errs field.ErrorList
	env := sets.New[string]()
	if spec.Pod != nil {
		for _, e := range spec.Pod.EtcdEnv {
			env.Insert(e.Name)
		}
	}
	conflict := func(fp *field.Path, names ...string) {
		for _, n := range names {
			if env.Has(n) {
				errs = append(errs, field.Invalid(fp, fp.String(), fmt.Sprintf(
					"is also set through pod.etcdEnv %s; etcd refuses to start with both, keep one", n)))
			}
		}
	}
	if m.Quota != nil {
		if m.Quota.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child("quota"), m.Quota.String(), "must be a positive size, like 4Gi"))
		}
		conflict(p.Child("quota"), EnvQuota)
	}
	if ac := m.AutoCompaction; ac != nil {
		ap := p.Child("autoCompaction")
		switch ac.Mode {
		case "", AutoCompactionPeriodic, AutoCompactionRevision:
		default:
			errs = append(errs, field.NotSupported(ap.Child("mode"), ac.Mode,
				[]AutoCompactionMode{AutoCompactionPeriodic, AutoCompactionRevision}))
		}
		switch {
		case ac.Retention == "":
			errs = append(errs, field.Required(ap.Child("retention"), `how much history to keep, like "1h" (periodic) or "10000" (revision)`))
		case !retentionRE.MatchString(ac.Retention):
			errs = append(errs, field.Invalid(ap.Child("retention"), ac.Retention, `must be a duration like "1h" or a whole number`))
		case ac.Mode == AutoCompactionRevision && !wholeRE.MatchString(ac.Retention):
			errs = append(errs, field.Invalid(ap.Child("retention"), ac.Retention, "revision mode keeps a whole number of revisions, like 10000"))
		}
		// etcd 3.2 has no --auto-compaction-mode and takes hours only.
		if v, err := etcdversion.Parse(spec.Version); err == nil && !v.Release().AutoCompactionMode &&
			(ac.Mode == AutoCompactionRevision || !wholeRE.MatchString(ac.Retention)) {
			errs = append(errs, field.Invalid(ap, ac.Retention, "etcd 3.2 only compacts periodically by whole hours, like retention \"1\""))
		}
		conflict(ap, EnvAutoCompactionMode, EnvAutoCompactionRetention)
	}
	if d := m.Defragmentation; d != nil {
		dp := p.Child("defragmentation")
		if d.Schedule != "" {
			if len(d.Schedule) > MaxDefragScheduleLength {
				errs = append(errs, field.TooLong(dp.Child("schedule"), d.Schedule, MaxDefragScheduleLength))
			} else if _, err := cron.ParseStandard(d.Schedule); err != nil {
				errs = append(errs, field.Invalid(dp.Child("schedule"), d.Schedule,
					fmt.Sprintf(`must be a cron schedule like "0 3 * * *" or "@daily": %v`, err)))
			}
		}
		if pct := d.FreeSpacePercent; pct != nil && (*pct < 0 || *pct > 100) {
			errs = append(errs, field.Invalid(dp.Child("freeSpacePercent"), *pct, "must be between 0 (off) and 100"))
		}
		if q := d.MinFreeSpace; q != nil && q.Sign() < 0 {
			errs = append(errs, field.Invalid(dp.Child("minFreeSpace"), q.String(), "must not be negative"))
		}
	}
	if c := m.CorruptionCheck; c != nil {
		cp := p.Child("corruptionCheck")
		if c.Initial != nil {
			conflict(cp.Child("initial"), EnvInitialCorruptCheck)
		}
		if c.PeriodicInterval != nil {
			if c.PeriodicInterval.Duration < 0 {
				errs = append(errs, field.Invalid(cp.Child("periodicInterval"), c.PeriodicInterval.Duration.String(), "must not be negative"))
			}
			conflict(cp.Child("periodicInterval"), EnvCorruptCheckTime, EnvCorruptCheckTime36)
		}
		if c.CompactHashCheck != nil {
			conflict(cp.Child("compactHashCheck"), EnvCompactHashCheck)
		}
	}
	return errs
}

// validateSchedule checks schedule, timeZone and retention. The CRD checks the
// schedule's shape only (CEL cannot parse cron), so a bad field or zone is
// refused here and reported by the backup operator.
func (pol *BackupPolicy) validateSchedule(pp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pol.Schedule != "" && pol.BackupIntervalInSecond > 0 {
		errs = append(errs, field.Invalid(pp.Child("schedule"), pol.Schedule, BackupScheduleOrIntervalMessage))
	}
	switch {
	case len(pol.Schedule) > MaxBackupScheduleLength:
		errs = append(errs, field.TooLong(pp.Child("schedule"), pol.Schedule, MaxBackupScheduleLength))
	case pol.Schedule != "":
		if _, err := parseCron(pol.Schedule); err != nil {
			errs = append(errs, field.Invalid(pp.Child("schedule"), pol.Schedule, fmt.Sprintf("%s: %v", BackupScheduleMessage, err)))
		}
	}
	switch {
	case len(pol.TimeZone) > MaxTimeZoneLength:
		errs = append(errs, field.TooLong(pp.Child("timeZone"), pol.TimeZone, MaxTimeZoneLength))
	default:
		if _, err := LoadTimeZone(pol.TimeZone); err != nil {
			errs = append(errs, field.Invalid(pp.Child("timeZone"), pol.TimeZone, err.Error()))
		}
	}
	if r := pol.Retention; r != nil {
		rp := pp.Child("retention")
		for _, tier := range []struct {
			name string
			n    int
		}{{"hourly", r.Hourly}, {"daily", r.Daily}, {"weekly", r.Weekly}, {"monthly", r.Monthly}} {
			if tier.n < 0 {
				errs = append(errs, field.Invalid(rp.Child(tier.name), tier.n, "must not be negative"))
			}
		}
	}
	return errs
}
