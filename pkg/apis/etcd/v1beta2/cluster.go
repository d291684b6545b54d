package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DefaultRepository is where the etcd image is pulled from; the image tag is "v<version>".
	DefaultRepository = "quay.io/coreos/etcd"
	// DefaultEtcdVersion is the etcd version of a new cluster whose spec names
	// none: the newest patch release of the newest minor version with a year
	// of patch releases behind it (docs/user-guide/versions.md says why). A
	// cluster that runs already keeps the version it runs. The original
	// defaulted to 3.2.13, which no longer runs on current nodes.
	DefaultEtcdVersion = "3.6.16"
	// DefaultBusyboxImage pins a glibc busybox: the uclibc nslookup of busybox:latest
	// ignores the resolv.conf search list and the DNS init container never finishes.
	DefaultBusyboxImage = "busybox:1.28.0-glibc"

	// MaxNameLength keeps "<cluster>-<10 random chars>" within a 63-character DNS label.
	MaxNameLength  = 52
	MinClusterSize = 1
	MaxClusterSize = 7

	// ScopeAnnotation opts an EtcdCluster into management by a cluster-wide operator.
	ScopeAnnotation  = "etcd.database.coreos.com/scope"
	ScopeClusterWide = "clusterwide"

	// RotateCertificatesAnnotation asks the operator to renew every
	// certificate it issued (spec.TLS.issued) now, one secret at a time:
	// each new value is one rotation, recorded in
	// status.certificatesRotated once done. `kubectl etcd rotate-certs`
	// sets it to the time.
	RotateCertificatesAnnotation = "etcd.database.coreos.com/rotate-certificates"
	// RotatedForAnnotation is set on each certificate secret renewed for a
	// rotation the user asked for, to the value of
	// RotateCertificatesAnnotation it was renewed for: written with the new
	// certificate in one update, it says which secrets are done.
	RotatedForAnnotation = "etcd.database.coreos.com/rotated-for"
	// RotateCAAnnotation asks the operator to rotate the CA of issued
	// TLS in ordered steps (docs/user-guide/tls.md); each new value is one
	// rotation. The CA secret records the last one carried out to its end
	// as etcd.database.coreos.com/ca-rotated.
	RotateCAAnnotation = "etcd.database.coreos.com/rotate-ca"
	// HoldClientsAnnotation, "true", holds a switch of TLS in a running
	// cluster while members serve clients http and https on the client
	// port: before its last stage, which drops the scheme clients leave,
	// so that they can move meanwhile. Removing it lets the switch end.
	HoldClientsAnnotation = "etcd.database.coreos.com/tls-switch-hold-clients"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdCluster is an etcd cluster managed by etcd-operator.
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the cluster the user asks for.
	Spec ClusterSpec `json:"spec"`
	// Status is what the operator last observed of the cluster.
	Status ClusterStatus `json:"status"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdClusterList is a list of EtcdClusters.
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

// ClusterSpec is what the user asks for.
type ClusterSpec struct {
	// Size is the number of members, 1 to 7.
	Size int `json:"size"`
	// Repository is the etcd image repository; it must carry the official "v<version>" tags.
	Repository string `json:"repository,omitempty"`
	// Version is the etcd version, with or without a leading "v".
	Version string `json:"version,omitempty"`
	// Paused stops the operator from changing the cluster.
	Paused bool `json:"paused,omitempty"`
	// Pod is the template knobs of member pods. Changes apply to new members only.
	Pod *PodPolicy `json:"pod,omitempty"`
	// TLS configures static TLS for peers and clients.
	TLS *TLSPolicy `json:"TLS,omitempty"`
	// Maintenance is the day-2 care of the data: quota, compaction,
	// defragmentation and corruption checks.
	Maintenance *MaintenancePolicy `json:"maintenance,omitempty"`
	// DisasterRecovery, when enabled, lets the operator recover a cluster
	// whose quorum is lost for good. Off by default.
	DisasterRecovery *DisasterRecoveryPolicy `json:"disasterRecovery,omitempty"`
	// Adoption is what the operator does with members that
	// coreos/etcd-operator v0.9.4 made and ran, found when it takes over.
	Adoption *AdoptionPolicy `json:"adoption,omitempty"`
	// Bootstrap is how a new cluster's first members are started. It is
	// read only while the cluster is being created and has never been
	// available: every later change (scaling, replacing a member) adds or
	// removes one member at a time, whatever it says.
	Bootstrap *BootstrapPolicy `json:"bootstrap,omitempty"`
}

// BootstrapMode is a way of starting the members of a new cluster.
type BootstrapMode string

const (
	// BootstrapSeedAndJoin starts one seed member, then adds the others one
	// at a time, as coreos/etcd-operator did.
	BootstrapSeedAndJoin BootstrapMode = "SeedAndJoin"
	// BootstrapTogether starts every member of spec.size at once, from one
	// static --initial-cluster naming all of them: a cluster that holds no
	// data yet needs no membership change made one at a time. The default:
	// a new cluster is serving in about the time its pods take to start.
	BootstrapTogether BootstrapMode = "Together"
)

// BootstrapPolicy is how a new cluster's first members are started.
type BootstrapPolicy struct {
	// Mode is Together (the default: every member started at once) or
	// SeedAndJoin (one seed, then one member added at a time, as
	// coreos/etcd-operator started clusters).
	Mode BootstrapMode `json:"mode,omitempty"`
}

// StartsTogether tells whether a new cluster of this spec starts its
// members together: SeedAndJoin not asked for, and more than one member.
func (s *ClusterSpec) StartsTogether() bool {
	seedAndJoin := s.Bootstrap != nil && s.Bootstrap.Mode == BootstrapSeedAndJoin
	return !seedAndJoin && s.Size > 1
}

// AdoptionPolicy is what the operator does with the members of a cluster
// that coreos/etcd-operator v0.9.4 made. By default they are kept as the
// original made them: read, reported in the status, never restarted,
// replaced, resized or upgraded.
type AdoptionPolicy struct {
	// Convert asks for the adopted members to be replaced, one at a time, by
	// members of this operator's pod layout: each new member is added (as a
	// learner, then promoted) before one of the original's is removed, the
	// leader last, so the cluster never has fewer members than spec.size.
	// It starts from a cluster at rest (every member ready, spec.size and
	// spec.version as the members run) and waits, saying why in
	// status.reason, otherwise.
	Convert bool `json:"convert,omitempty"`
}

// PodPolicy is the knobs of the etcd member pods.
type PodPolicy struct {
	// Labels are added to member pods; "app" and "etcd_*" are reserved.
	Labels map[string]string `json:"labels,omitempty"`
	// NodeSelector restricts member pods to nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity is the member pods' scheduling affinity, as in a pod spec.
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// AntiAffinity is deprecated: use Affinity. When true and Affinity is unset, members
	// are spread one per node.
	AntiAffinity bool `json:"antiAffinity,omitempty"`
	// Resources apply to the etcd container and every init container.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// Tolerations let member pods run on tainted nodes, as in a pod spec.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// EtcdEnv is appended to the etcd container's environment, the way to set etcd flags
	// such as ETCD_AUTO_COMPACTION_RETENTION. Bootstrap settings may not be overridden.
	EtcdEnv []corev1.EnvVar `json:"etcdEnv,omitempty"`
	// PersistentVolumeClaimSpec gives each member its own PVC instead of an emptyDir.
	PersistentVolumeClaimSpec *corev1.PersistentVolumeClaimSpec `json:"persistentVolumeClaimSpec,omitempty"`
	// Annotations are added to member pods; etcd.version is reserved.
	Annotations map[string]string `json:"annotations,omitempty"`
	// BusyboxImage is the image of the DNS init container.
	BusyboxImage string `json:"busyboxImage,omitempty"`
	// SecurityContext is the member pods' security context, as in a pod
	// spec: runAsNonRoot, runAsUser (and fsGroup with persistent volumes)
	// run members as non-root. Every container drops all capabilities
	// whatever it says.
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// DNSTimeoutInSecond bounds the wait for the member's DNS record; 0 waits forever.
	DNSTimeoutInSecond int64 `json:"DNSTimeoutInSecond,omitempty"`
	// ClusterDomain is appended to member DNS names, e.g. ".cluster.local".
	ClusterDomain string `json:"ClusterDomain"`
	// PriorityClassName is given to member pods, so that a full node preempts
	// lesser pods rather than leave a member unscheduled.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// TopologySpreadConstraints are given to member pods, e.g. to spread members
	// over zones. A constraint without labelSelector selects the cluster's own
	// members (app=etcd,etcd_cluster=<name>).
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// NodeLostAfterSeconds, when set, counts a node whose Ready condition
	// has not been True for this long as lost for good: a member pod stuck
	// terminating on it (evicted, its node never confirming the deletion) is
	// force-deleted once etcd's leader confirms its member does not answer,
	// and a member whose claim's volume can be used on that node only is
	// replaced on a new claim. Unset (0), only a deleted Node object counts,
	// as Kubernetes itself has it. At least 60 when set: a node that only
	// restarts is NotReady for a while too.
	NodeLostAfterSeconds int64 `json:"nodeLostAfterSeconds,omitempty"`
}

// ClusterPhase is the coarse state of a cluster.
type ClusterPhase string

const (
	ClusterPhaseNone     ClusterPhase = ""
	ClusterPhaseCreating ClusterPhase = "Creating"
	ClusterPhaseRunning  ClusterPhase = "Running"
	ClusterPhaseFailed   ClusterPhase = "Failed"
)

// ClusterConditionType names a condition of ClusterStatus.
type ClusterConditionType string

const (
	ClusterConditionAvailable  ClusterConditionType = "Available"
	ClusterConditionRecovering ClusterConditionType = "Recovering"
	ClusterConditionScaling    ClusterConditionType = "Scaling"
	ClusterConditionUpgrading  ClusterConditionType = "Upgrading"
)

// ClusterStatus is what the operator observed.
type ClusterStatus struct {
	// Phase is Creating, Running or Failed.
	Phase ClusterPhase `json:"phase"`
	// Reason lists the problems the operator sees and cannot fix by itself.
	Reason string `json:"reason,omitempty"`
	// ControlPaused is true while spec.paused stops the operator.
	ControlPaused bool `json:"controlPaused,omitempty"`
	// ObservedGeneration is the metadata.generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Available, Scaling, Upgrading, Recovering, NoSpace and
	// DataCorrupt.
	Conditions []ClusterCondition `json:"conditions,omitempty"`
	// Size is the number of members the operator knows of.
	Size int `json:"size"`
	// Selector is the label selector of the member pods, for the scale
	// subresource (kubectl scale, autoscalers).
	Selector string `json:"selector,omitempty"`
	// ServiceName is the client Service, reached at ClientPort.
	ServiceName string `json:"serviceName,omitempty"`
	// ClientPort is the client port of ServiceName.
	ClientPort int `json:"clientPort,omitempty"`
	// Members lists the member pods by readiness.
	Members MembersStatus `json:"members"`
	// ReadyMembers is "ready/size", like 2/3: the members that are Running
	// and Ready, of the size asked for (the READY column).
	ReadyMembers string `json:"readyMembers,omitempty"`
	// CurrentVersion is the etcd version the members run.
	CurrentVersion string `json:"currentVersion"`
	// TargetVersion is the version of an upgrade in progress, empty otherwise.
	TargetVersion string `json:"targetVersion"`
	// Leader is the name of the member the others follow.
	Leader string `json:"leader,omitempty"`
	// MemberDetails is what each etcd member last reported: role, version,
	// database size and alarms.
	MemberDetails []MemberDetail `json:"memberDetails,omitempty"`
	// Maintenance records the operator's maintenance of the data.
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`
	// Recovery records the last disaster recovery.
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
	// CertificatesRotated is the last value of annotation
	// etcd.database.coreos.com/rotate-certificates whose rotation is done:
	// every certificate secret of issued TLS was renewed for it.
	CertificatesRotated string `json:"certificatesRotated,omitempty"`
	// CARotation is the CA of issued TLS and where its rotation is, as the
	// CA secret's annotations record them; absent without issued TLS or
	// before the CA secret is read.
	CARotation *CARotationStatus `json:"caRotation,omitempty"`
}

// CARotationStatus is the CA of issued TLS and its rotation. Every field is
// read again from the CA secret at each pass: it says what the secret says.
type CARotationStatus struct {
	// CA is the CA the certificates are issued from (the CA secret's
	// ca.crt).
	CA *CACertificate `json:"ca,omitempty"`
	// MadeByOperator is true when the operator made that CA (when it made
	// the CA secret, or by a rotation); false for a CA the user brought,
	// which the operator rotates only when asked.
	MadeByOperator bool `json:"madeByOperator,omitempty"`
	// AutoRotateAt is when the operator begins a rotation of a CA it made
	// without being asked: once four fifths of its lifetime have passed.
	AutoRotateAt *metav1.Time `json:"autoRotateAt,omitempty"`
	// Rotation names the rotation under way: the value of annotation
	// etcd.database.coreos.com/rotate-ca it carries out, or "auto-" and
	// the old CA's expiry for one the operator began by itself. Empty when
	// none is under way.
	Rotation string `json:"rotation,omitempty"`
	// Unasked is true for a rotation under way that the operator began by
	// itself, as the CA neared its expiry.
	Unasked bool `json:"unasked,omitempty"`
	// Step is the step the rotation is at: trust-both (certificate secrets
	// are given the old and the new CA, then members restarted), reissue
	// (certificates are issued from the new CA) or trust-new (certificate
	// secrets are given the new CA alone, then members restarted again).
	Step string `json:"step,omitempty"`
	// Started is when the rotation under way began, StepStarted when it
	// reached its step.
	Started *metav1.Time `json:"started,omitempty"`
	// StepStarted is when the rotation under way reached its step.
	StepStarted *metav1.Time `json:"stepStarted,omitempty"`
	// OldCA and NewCA are the CA being replaced and its successor, while
	// a rotation is under way.
	OldCA *CACertificate `json:"oldCA,omitempty"`
	// NewCA is the CA that replaces OldCA.
	NewCA *CACertificate `json:"newCA,omitempty"`
	// LastRotation names the last rotation carried out to its end, and
	// LastRotated is when it ended.
	LastRotation string `json:"lastRotation,omitempty"`
	// LastRotated is when the last rotation ended.
	LastRotated *metav1.Time `json:"lastRotated,omitempty"`
}

// CACertificate names a CA certificate.
type CACertificate struct {
	// Subject is its distinguished name.
	Subject string `json:"subject,omitempty"`
	// Serial is its serial number, in hexadecimal.
	Serial string `json:"serial"`
	// NotAfter is when it expires.
	NotAfter metav1.Time `json:"notAfter"`
}

// ClusterCondition is one condition of a cluster. Times are RFC 3339 strings, as in the original.
type ClusterCondition struct {
	// Type is the aspect the condition describes, like Available.
	Type ClusterConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastUpdateTime is when the operator last set the condition.
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// Reason is a CamelCase word for why, like ClusterAvailable or LostQuorum.
	Reason string `json:"reason,omitempty"`
	// Message is the same for people.
	Message string `json:"message,omitempty"`
}

// MembersStatus lists member pods by readiness.
type MembersStatus struct {
	// Ready are the members whose pod is Running and Ready.
	Ready []string `json:"ready,omitempty"`
	// Unready are the other members: starting, failing, or without a pod.
	Unready []string `json:"unready,omitempty"`
}
