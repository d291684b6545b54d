// Package crds defines the project's CustomResourceDefinitions, the single source of
// both install paths (the operators' --create-crd=true and the YAML under example/crd),
// and installs them.
package crds

import (
	"fmt"
	"reflect"
	"strings"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// All returns the three definitions, in a stable order.
func All() []*apiextv1.CustomResourceDefinition {
	return []*apiextv1.CustomResourceDefinition{EtcdCluster(), EtcdBackup(), EtcdRestore()}
}

// Regular expressions shared with the Go validation in pkg/apis, written as CEL raw strings.
const (
	dnsSubdomainRE = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	envNameRE      = `^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	// schemaVersionRE is etcdversion.Pattern narrowed to what the operator runs: 3.2 and later.
	schemaVersionRE = `^v?3\.([2-9]|[1-9][0-9]+)\.[0-9]+(-[0-9A-Za-z.-]+)?$`
)

func matches(re string) string { return "self.matches(r'" + re + "')" }

func secretName() schema {
	return withRules(boundedStr(253), [2]string{matches(dnsSubdomainRE), "must be the name of a Secret (a DNS subdomain)"})
}

// bucketPath is the path of a store; s3 admits the capitals of old S3 buckets.
func bucketPath(s3 bool) schema {
	bucket, msg := api.BucketNamePattern, api.BucketNameMessage
	if s3 {
		bucket, msg = api.S3BucketNamePattern, api.S3BucketNameMessage
	}
	return withRules(boundedStr(1024),
		[2]string{matches(api.BucketPathPattern), api.BucketPathMessage},
		[2]string{"!" + matches(api.BucketPathPattern) + " || " + matches(bucket), msg},
		[2]string{"!" + matches(api.BadKeyPattern), api.BadKeyMessage},
		[2]string{"!" + matches(api.ControlCharPattern), api.ControlCharMessage},
	)
}

func newCRD(plural, kind string, obj any, shortNames []string, root schema, columns []apiextv1.CustomResourceColumnDefinition) *apiextv1.CustomResourceDefinition {
	describe(&root, reflect.TypeOf(obj))
	return &apiextv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + api.GroupName},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: api.GroupName,
			Scope: apiextv1.NamespaceScoped,
			// Spelled out because the apiserver defaults it: Install compares definitions.
			Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter},
			Names: apiextv1.CustomResourceDefinitionNames{
				Plural:     plural,
				Singular:   strings.ToLower(kind),
				Kind:       kind,
				ListKind:   kind + "List",
				ShortNames: shortNames,
			},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name:                     api.Version,
				Served:                   true,
				Storage:                  true,
				Schema:                   &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				Subresources:             &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: columns,
			}},
		},
	}
}

// WithoutStatusSubresource returns a copy of crd that serves no status
// subresource, for an operator whose role may update the resource but not
// <resource>/status, as the original's roles: status is then part of the
// object, written with an update of it as the original did, and kept by the
// apiserver. Everything else stays, the scale subresource too: the apiserver
// accepts it without the status subresource and reads the replicas and the
// selector from the object's .status either way.
func WithoutStatusSubresource(crd *apiextv1.CustomResourceDefinition) *apiextv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	for i := range out.Spec.Versions {
		sub := out.Spec.Versions[i].Subresources
		if sub == nil {
			continue
		}
		sub.Status = nil
		if sub.Scale == nil {
			// Nothing left: no block at all rather than an empty one.
			out.Spec.Versions[i].Subresources = nil
		}
	}
	return out
}

func column(name, typ, path string) apiextv1.CustomResourceColumnDefinition {
	return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path}
}

// wide is a column kubectl shows only with -o wide.
func wide(c apiextv1.CustomResourceColumnDefinition) apiextv1.CustomResourceColumnDefinition {
	c.Priority = 1
	return c
}

// Short names. EtcdCluster keeps the original's; the others avoid "eb",
// which Argo Events' EventBus uses.
var (
	clusterShortNames = []string{"etcd", "etcdclus"}
	backupShortNames  = []string{"etcdbk"}
	restoreShortNames = []string{"etcdrs"}
)

var ageColumn = column("Age", "date", ".metadata.creationTimestamp")

func rootSchema(description string, spec, status schema, rules ...[2]string) schema {
	s := object(map[string]schema{
		"apiVersion": str(),
		"kind":       str(),
		"metadata":   {Type: "object"},
		"spec":       spec,
		"status":     status,
	}, "spec")
	s.Description = description
	return withRules(s, rules...)
}

// EtcdCluster is the definition of etcdclusters.etcd.database.coreos.com.
func EtcdCluster() *apiextv1.CustomResourceDefinition {
	root := rootSchema("EtcdCluster is an etcd cluster managed by etcd-operator.",
		clusterSpecSchema(), clusterStatusSchema(),
		[2]string{fmt.Sprintf("size(self.metadata.name) <= %d", api.MaxNameLength),
			fmt.Sprintf("metadata.name: an EtcdCluster name may have at most %d characters, so that member names (name plus 11 characters) fit in a DNS label", api.MaxNameLength)},
	)
	crd := newCRD(api.EtcdClusterResourcePlural, api.EtcdClusterResourceKind, api.EtcdCluster{}, clusterShortNames, root,
		[]apiextv1.CustomResourceColumnDefinition{
			column("Ready", "string", ".status.readyMembers"),
			column("Available", "string", `.status.conditions[?(@.type=="Available")].status`),
			column("Version", "string", ".status.currentVersion"),
			column("Phase", "string", ".status.phase"),
			ageColumn,
			wide(column("Leader", "string", ".status.leader")),
			wide(column("Reason", "string", `.status.conditions[?(@.type=="Available")].reason`)),
		})
	// kubectl scale etcd/NAME --replicas=5 sets spec.size; the schema's 1..7
	// still applies to it. status.size counts the members, and status.selector
	// selects their pods, as an autoscaler needs.
	crd.Spec.Versions[0].Subresources.Scale = &apiextv1.CustomResourceSubresourceScale{
		SpecReplicasPath:   ".spec.size",
		StatusReplicasPath: ".status.size",
		LabelSelectorPath:  new(".status.selector"),
	}
	return crd
}

// secureExpr is the CEL form of TLSPolicy.IsSecureClient / IsSecurePeer for a cluster spec x.
func secureExpr(x string, peer bool) string {
	if peer {
		return fmt.Sprintf("(%[2]s || has(%[1]s.TLS) && has(%[1]s.TLS.static) && has(%[1]s.TLS.static.member) && has(%[1]s.TLS.static.member.peerSecret) && %[1]s.TLS.static.member.peerSecret != '')", x, issuedExpr(x))
	}
	return fmt.Sprintf("(%[2]s || has(%[1]s.TLS) && has(%[1]s.TLS.static) && has(%[1]s.TLS.static.operatorSecret) && %[1]s.TLS.static.operatorSecret != '')", x, issuedExpr(x))
}

// tlsOffExpr is the CEL form of TLSPolicy.Mode() == "" for a cluster spec x.
func tlsOffExpr(x string) string {
	return fmt.Sprintf("!(%s || %s)", secureExpr(x, false), secureExpr(x, true))
}

// issuedExpr is the CEL form of TLSPolicy.IsIssued for a cluster spec x.
func issuedExpr(x string) string {
	return fmt.Sprintf("(has(%[1]s.TLS) && has(%[1]s.TLS.issued))", x)
}

// fromCertManagerExpr is the CEL form of TLSPolicy.FromCertManager for an
// issued cluster spec x.
func fromCertManagerExpr(x string) string {
	return fmt.Sprintf("has(%[1]s.TLS.issued.issuerRef)", x)
}

// caSecretExpr is the caSecret of an issued cluster spec x, empty for the default.
func caSecretExpr(x string) string {
	return fmt.Sprintf("(has(%[1]s.TLS.issued.caSecret) ? %[1]s.TLS.issued.caSecret : '')", x)
}

func clusterSpecSchema() schema {
	reserved := make([]string, 0, api.ReservedEtcdEnv.Len())
	for _, name := range sets.List(api.ReservedEtcdEnv) {
		reserved = append(reserved, "'"+name+"'")
	}
	envVar := withRules(object(map[string]schema{
		"name":      boundedStr(128),
		"value":     str(),
		"valueFrom": openObject(nil),
	}, "name"),
		[2]string{"self.name.matches(r'" + envNameRE + "')", "name must be a valid environment variable name"},
		[2]string{"!(self.name in [" + strings.Join(reserved, ", ") + "]) && !self.name.startsWith('" + api.ReservedEtcdEnvPrefix + "')",
			"name " + api.ReservedEtcdEnvMessage},
	)
	env := array(envVar)
	env.XListType = ptr("map")
	env.XListMapKeys = []string{"name"}
	env.MaxItems = ptr[int64](64)

	labels := stringMap()
	labels.MaxProperties = ptr[int64](64)
	labels = withRules(labels, [2]string{"self.all(k, k != 'app' && !k.startsWith('etcd_'))",
		`labels "app" and "etcd_*" are reserved by the operator`})
	annotations := withRules(stringMap(), [2]string{"!('" + api.AnnotationVersion + "' in self)",
		"annotation etcd.version is reserved by the operator: it records the member's etcd version"})

	pvc := withRules(openObject(map[string]schema{
		"accessModes":      array(enum("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany")),
		"storageClassName": str(),
		"resources":        openObject(map[string]schema{"requests": quantityMap(), "limits": quantityMap()}),
	}), [2]string{"has(self.resources) && has(self.resources.requests) && 'storage' in self.resources.requests",
		"every member's volume needs resources.requests.storage, like 1Gi"})

	pod := object(map[string]schema{
		"labels":       labels,
		"nodeSelector": stringMap(),
		"affinity":     openObject(nil),
		"antiAffinity": withDescription(boolean(), "Deprecated: use affinity. Spreads members one per node."),
		"resources":    openObject(map[string]schema{"limits": quantityMap(), "requests": quantityMap()}),
		"tolerations": array(openObject(map[string]schema{
			"key":               str(),
			"operator":          enum("Equal", "Exists", ""),
			"value":             str(),
			"effect":            enum("NoSchedule", "PreferNoSchedule", "NoExecute", ""),
			"tolerationSeconds": integer(),
		})),
		"etcdEnv":                   env,
		"persistentVolumeClaimSpec": pvc,
		"annotations":               annotations,
		"busyboxImage": withRules(boundedStr(512), [2]string{matches(api.ImagePattern),
			"must be an image reference like busybox:1.28.0-glibc"}),
		"securityContext": openObject(map[string]schema{
			"runAsUser": nonNegative(), "runAsGroup": nonNegative(), "fsGroup": nonNegative(),
		}),
		"priorityClassName": withDescription(boundedStr(253), "PriorityClass of member pods, so that a full node preempts lesser pods rather than leave a member unscheduled."),
		"topologySpreadConstraints": withDescription(array(openObject(map[string]schema{
			"maxSkew":           integer(),
			"topologyKey":       str(),
			"whenUnsatisfiable": enum("DoNotSchedule", "ScheduleAnyway"),
		})), "Topology spread constraints of member pods, e.g. over zones; one without labelSelector spreads the cluster's own members."),
		"DNSTimeoutInSecond": withDescription(nonNegative(), "Seconds to wait for the member's DNS record; 0 waits forever."),
		"nodeLostAfterSeconds": withDescription(withRules(nonNegative(), [2]string{fmt.Sprintf("self == 0 || self >= %d", api.MinNodeLostAfterSeconds),
			fmt.Sprintf("must be 0 (only a deleted Node counts as lost) or at least %d seconds", api.MinNodeLostAfterSeconds)}),
			"Seconds after which a node not Ready counts as lost for good: member pods stuck terminating on it are force-deleted, and members on volumes tied to it replaced; 0 (unset) waits for the Node's deletion."),
		"ClusterDomain": withRules(boundedStr(253), [2]string{matches(api.ClusterDomainPattern),
			"must be empty or a DNS suffix starting with a dot, like .cluster.local"}),
	})

	tls := object(map[string]schema{
		"static": withRules(object(map[string]schema{
			"member": object(map[string]schema{
				"peerSecret":   secretName(),
				"serverSecret": secretName(),
			}),
			"operatorSecret": secretName(),
		}), [2]string{
			"(has(self.operatorSecret) && self.operatorSecret != '') == (has(self.member) && has(self.member.serverSecret) && self.member.serverSecret != '')",
			"operatorSecret and member.serverSecret go together: members that serve clients over https need the operator's client certificate, and the other way round",
		}),
		"issued": withRules(object(map[string]schema{
			"caSecret": secretName(),
			"certificateValidity": withRules(boundedStr(32), [2]string{
				matches(api.DurationPattern) + fmt.Sprintf(" && (duration(self) == duration('0s') || duration(self) >= duration('%dh') && duration(self) <= duration('%dh'))",
					int(api.MinCertificateValidity.Hours()), int(api.MaxCertificateValidity.Hours())),
				`must be a duration like "2160h", ` + api.CertificateValidityRange}),
			"issuerRef": withRules(object(map[string]schema{
				"name":  secretName(),
				"kind":  boundedStr(63),
				"group": boundedStr(253),
			}, "name"), [2]string{
				"has(self.group) && self.group != '" + api.CertManagerGroup + "' || !has(self.kind) || self.kind in ['', '" + api.IssuerKind + "', '" + api.ClusterIssuerKind + "']",
				"kind must be " + api.IssuerKind + " or " + api.ClusterIssuerKind + " for a cert-manager issuer",
			}),
		}), [2]string{"!(has(self.issuerRef) && has(self.caSecret) && self.caSecret != '')",
			"issuerRef and caSecret exclude each other: the certificates come either from a cert-manager issuer or from the operator's own CA"}),
	})
	tls = withRules(tls, [2]string{"!(has(self.static) && has(self.issued))",
		"static and issued exclude each other: either the user's secrets or the operator's certificates"})

	return withRules(object(map[string]schema{
		"maintenance": maintenanceSchema(),
		"disasterRecovery": withDescription(object(map[string]schema{
			"enabled":             withDescription(boolean(), "Lets the operator recover a cluster whose quorum is lost for good, accepting the loss of what only the lost members held. Off by default."),
			"gracePeriodInSecond": withDescription(intRange(0, api.MaxRecoveryGracePeriodInSecond), "How long the quorum must have been lost before recovering; 0 means 300."),
			"fromBackup":          withDescription(boolean(), "Restore a cluster left without any member's data from the newest successful EtcdBackup of this cluster."),
		}), "Opt-in recovery of a cluster whose quorum is lost for good."),
		"adoption": withDescription(object(map[string]schema{
			"convert": withDescription(boolean(), "Move the members adopted from coreos/etcd-operator v0.9.4 to this operator's pod layout, one at a time. Not carried out yet: the adopted members are kept as they are and status.reason says so."),
		}), "What the operator does with members that coreos/etcd-operator v0.9.4 made; by default they are kept as they are."),
		"bootstrap": withDescription(object(map[string]schema{
			"mode": withDescription(enum(string(api.BootstrapSeedAndJoin), string(api.BootstrapTogether)), "Together (the default) starts every member of spec.size at once, from one static initial cluster; SeedAndJoin starts one seed member, then adds the others one at a time, as coreos/etcd-operator did."),
		}), "How a new cluster's first members are started; read only while the cluster is created and was never available."),
		"size": withDescription(intRange(api.MinClusterSize, api.MaxClusterSize), "Number of members, 1 to 7."),
		"repository": withRules(boundedStr(255), [2]string{matches(api.RepositoryPattern),
			"must be an image repository without tag or digest, like quay.io/coreos/etcd"}),
		"version": withRules(boundedStr(64), [2]string{matches(schemaVersionRE),
			"must be an etcd version, 3.2 or later, like 3.5.21"}),
		"paused": boolean(),
		"pod":    pod,
		"TLS":    tls,
	}, "size"), [2]string{
		fmt.Sprintf("%s || %s || (%s == %s && %s == %s)",
			tlsOffExpr("self"), tlsOffExpr("oldSelf"),
			secureExpr("self", false), secureExpr("oldSelf", false), secureExpr("self", true), secureExpr("oldSelf", true)),
		api.TLSOfPeersOrClientsChangedMessage,
	}, [2]string{
		fmt.Sprintf("!%s || %s || (%s && %s)", tlsOffExpr("oldSelf"), tlsOffExpr("self"), secureExpr("self", false), secureExpr("self", true)),
		api.TLSSwitchedOnPartlyMessage,
	}, [2]string{
		fmt.Sprintf("!%s || %s || %s", tlsOffExpr("self"), tlsOffExpr("oldSelf"), issuedExpr("oldSelf")),
		api.StaticTLSSwitchedOffMessage,
	}, [2]string{
		fmt.Sprintf("%s == %s || %s || %s", issuedExpr("self"), issuedExpr("oldSelf"), tlsOffExpr("self"), tlsOffExpr("oldSelf")),
		"TLS cannot be switched between static and issued for an existing cluster",
	}, [2]string{
		fmt.Sprintf("!%s || !%s || %s == %s", issuedExpr("self"), issuedExpr("oldSelf"), caSecretExpr("self"), caSecretExpr("oldSelf")),
		"the CA of an existing cluster cannot be changed: its members' certificates were issued by the one it has",
	}, [2]string{
		fmt.Sprintf("!%s || !%s || %s == %s", issuedExpr("self"), issuedExpr("oldSelf"), fromCertManagerExpr("self"), fromCertManagerExpr("oldSelf")),
		api.IssuerSwitchedMessage,
	})
}

// maintenanceSchema is spec.maintenance. A cron schedule is only checked for
// its shape here (five fields or an @ shorthand); the operator parses it and
// reports a bad one in status.reason.
func maintenanceSchema() schema {
	// The quantity pattern already holds; the sign is in the text.
	positiveQuantity := withRules(quantity(), [2]string{
		`!string(self).startsWith('-') && !string(self).matches(r'^\+?0*(\.0*)?([KMGTPE]i|[numkMGTPE]|[eE].*)?$')`,
		"must be a positive size, like 4Gi"})
	nonNegativeQuantity := withRules(quantity(), [2]string{"!string(self).startsWith('-')", "must not be negative"})
	autoCompaction := withRules(object(map[string]schema{
		"mode": enum(string(api.AutoCompactionPeriodic), string(api.AutoCompactionRevision)),
		"retention": withRules(boundedStr(32), [2]string{matches(api.AutoCompactionRetentionPattern),
			`must be a duration like "1h" or a whole number`}),
	}, "retention"), [2]string{"!has(self.mode) || self.mode != 'revision' || self.retention.matches(r'^[0-9]+$')",
		"revision mode keeps a whole number of revisions, like 10000"})
	defrag := object(map[string]schema{
		"schedule": withRules(boundedStr(api.MaxDefragScheduleLength), [2]string{
			`self == '' || self.matches(r'^@(yearly|annually|monthly|weekly|daily|midnight|hourly|every .+)$') || self.matches(r'^\S+( +\S+){4}$')`,
			`must be a cron schedule like "0 3 * * *" or "@daily"`}),
		"freeSpacePercent": withDescription(intRange(0, 100), "Defragment a member once this percentage of its database file is free; 0 turns this off. Default 50."),
		"minFreeSpace":     withDescription(nonNegativeQuantity, "Least free space worth a defragmentation. Default 100Mi."),
	})
	corruption := object(map[string]schema{
		"initial": withDescription(boolean(), "Compare a starting member's data with its peers' before it serves. Default true."),
		"periodicInterval": withDescription(withRules(boundedStr(32), [2]string{matches(api.DurationPattern), `must be a duration like "4h"; "0s" turns the check off`}),
			"Time between the leader's full hash comparisons. Default 4h."),
		"compactHashCheck": withDescription(boolean(), "Compare the members' hashes at each compaction (etcd 3.5.5+). Default true."),
	})
	return object(map[string]schema{
		"quota":           withDescription(positiveQuantity, "Database size limit (--quota-backend-bytes). Default: derived from the claim size with a PVC, else etcd's 2 GiB."),
		"autoCompaction":  autoCompaction,
		"defragmentation": defrag,
		"corruptionCheck": corruption,
	})
}

func clusterStatusSchema() schema {
	return object(map[string]schema{
		"phase":              str(),
		"reason":             str(),
		"controlPaused":      boolean(),
		"observedGeneration": integer(),
		"conditions": array(object(map[string]schema{
			"type":               str(),
			"status":             str(),
			"lastUpdateTime":     str(),
			"lastTransitionTime": str(),
			"reason":             str(),
			"message":            str(),
		}, "type", "status")),
		"size":        integer(),
		"selector":    str(),
		"serviceName": str(),
		"clientPort":  integer(),
		"members": object(map[string]schema{
			"ready":   array(str()),
			"unready": array(str()),
		}),
		"readyMembers":   str(),
		"currentVersion": str(),
		"targetVersion":  str(),
		"leader":         str(),
		"memberDetails": array(object(map[string]schema{
			"name":                str(),
			"id":                  str(),
			"role":                str(),
			"version":             str(),
			"dbSize":              integer(),
			"dbSizeInUse":         integer(),
			"alarms":              array(str()),
			"lastDefragmentation": dateTime(),
			"error":               str(),
			"restarts":            integer(),
			"repair":              str(),
		}, "name", "id", "role")),
		"recovery": object(map[string]schema{
			"time":              dateTime(),
			"fromMember":        str(),
			"fromBackup":        str(),
			"recoveredRevision": integer(),
			"lastSeenRevision":  integer(),
			"message":           str(),
		}),
		"maintenance": object(map[string]schema{
			"lastCompaction":        dateTime(),
			"lastCompactedRevision": integer(),
			"v2EntriesUntilIndex":   integer(),
			"v2EntriesPending":      boolean(),
		}),
		"certificatesRotated": str(),
		"caRotation":          caRotationStatusSchema(),
	})
}

// caRotationStatusSchema is status.caRotation.
func caRotationStatusSchema() schema {
	ca := object(map[string]schema{
		"subject":  str(),
		"serial":   str(),
		"notAfter": dateTime(),
	}, "serial", "notAfter")
	return object(map[string]schema{
		"ca":             ca,
		"madeByOperator": boolean(),
		"autoRotateAt":   dateTime(),
		"rotation":       str(),
		"unasked":        boolean(),
		"step":           str(),
		"started":        dateTime(),
		"stepStarted":    dateTime(),
		"oldCA":          ca,
		"newCA":          ca,
		"lastRotation":   str(),
		"lastRotated":    dateTime(),
	})
}

var storageTypes = []string{
	string(api.BackupStorageTypeS3), string(api.BackupStorageTypeABS),
	string(api.BackupStorageTypeGCS), string(api.BackupStorageTypeOSS),
}

// sourceSchemas are the per-store blocks shared by EtcdBackup and EtcdRestore.
func sourceSchemas() map[string]schema {
	return map[string]schema{
		"s3": withRules(object(map[string]schema{
			"path":             bucketPath(true),
			"awsSecret":        secretName(),
			"endpoint":         str(),
			"forcePathStyle":   boolean(),
			"credentialSource": credentialSource(),
			"region":           withRules(boundedStr(64), [2]string{matches(api.RegionPattern), "must be a region name such as eu-west-1"}),
		}, "path"), append(credentialRules("awsSecret", false),
			[2]string{lendsIdentity + " || !has(self.region)", api.RegionWithSecretMessage})...),
		"abs": withRules(object(map[string]schema{
			"path":             bucketPath(false),
			"absSecret":        secretName(),
			"endpoint":         str(),
			"credentialSource": credentialSource(),
		}, "path"), append(credentialRules("absSecret", false),
			[2]string{"!" + lendsIdentity + " || has(self.endpoint)", api.ABSIdentityEndpointMessage})...),
		"gcs": withRules(object(map[string]schema{
			"path":             bucketPath(false),
			"gcpSecret":        secretName(),
			"endpoint":         str(),
			"credentialSource": credentialSource(),
		}, "path"), credentialRules("gcpSecret", true)...),
		"oss": object(map[string]schema{
			"path":      bucketPath(false),
			"ossSecret": secretName(),
			"endpoint":  str(),
		}, "path", "ossSecret"),
	}
}

func credentialSource() schema {
	return enum(string(api.CredentialSourceSecret), string(api.CredentialSourceOperatorServiceAccount))
}

// lendsIdentity is true for a source that asks for the operator's cloud identity.
const lendsIdentity = "(has(self.credentialSource) && self.credentialSource == '" + string(api.CredentialSourceOperatorServiceAccount) + "')"

// credentialRules say a source names its secret or asks for the operator's
// identity, not both; without either, only GCS is admitted (it then uses the
// operator's application default credentials, as the original did), unless its
// credentialSource is Secret.
func credentialRules(secretField string, optional bool) [][2]string {
	rules := [][2]string{{"!" + lendsIdentity + " || !has(self." + secretField + ")", api.SecretAndIdentityMessage}}
	need := "has(self." + secretField + ") || " + lendsIdentity
	msg := secretField + " names the secret holding the store's credentials; without one, credentialSource: OperatorServiceAccount uses the operator's own cloud identity where it lends it"
	if optional {
		need = "!has(self.credentialSource) || self.credentialSource != '" + string(api.CredentialSourceSecret) + "' || has(self." + secretField + ")"
		msg = "credentialSource Secret needs " + secretField
	}
	return append(rules, [2]string{need, msg})
}

// storageRules require the block that matches the storage type field.
func storageRules(typeField string) [][2]string {
	var rules [][2]string
	for _, t := range storageTypes {
		key := strings.ToLower(t)
		rules = append(rules, [2]string{
			fmt.Sprintf("self.%s != '%s' || has(self.%s)", typeField, t, key),
			fmt.Sprintf("%s %s needs spec.%s", typeField, t, key),
		})
	}
	return rules
}

// EtcdBackup is the definition of etcdbackups.etcd.database.coreos.com.
func EtcdBackup() *apiextv1.CustomResourceDefinition {
	props := sourceSchemas()
	endpoints := array(withRules(boundedStr(2048), [2]string{"self.startsWith('http://') || self.startsWith('https://')",
		"must be a client URL like http://example-etcd-cluster-client:2379"}))
	endpoints.MinItems = ptr[int64](1)
	props["etcdEndpoints"] = endpoints
	props["storageType"] = enum(storageTypes...)
	props["backupPolicy"] = withRules(object(map[string]schema{
		"timeoutInSecond":        withDescription(intRange(0, api.MaxBackupTimeoutInSecond), "Bound of one backup in seconds, at most a day; 0 means 60."),
		"backupIntervalInSecond": withDescription(intRange(0, api.MaxBackupIntervalInSecond), "Seconds between backups, at most a year; 0 means one backup."),
		"maxBackups":             withDescription(nonNegative(), "Periodic backups to keep; 0 keeps all."),
		"schedule":               backupScheduleSchema(),
		"timeZone": withRules(boundedStr(api.MaxTimeZoneLength), [2]string{matches(`^[A-Za-z0-9_+/-]*$`),
			`must be an IANA time zone name like "Europe/Berlin"`}),
		"retention": object(map[string]schema{
			"hourly":  nonNegative(),
			"daily":   nonNegative(),
			"weekly":  nonNegative(),
			"monthly": nonNegative(),
		}),
		"archive": object(map[string]schema{
			"intervalInSecond": withDescription(intRange(0, api.MaxArchiveIntervalInSecond),
				fmt.Sprintf("Seconds a change waits at most before it is stored, at most an hour; 0 means %d.", api.DefaultArchiveIntervalInSecond)),
			"drill": object(map[string]schema{
				"enabled": withDescription(boolean(), "Restore the recovery point and compare it with the live cluster; default true."),
				"intervalInSecond": withDescription(intRange(0, api.MaxArchiveDrillIntervalInSecond),
					"Drill before the first periodic snapshot this long after the previous drill, verified or not; 0 drills before each verified snapshot."),
			}),
		}),
	}), [2]string{"!has(self.schedule) || self.schedule == '' || !has(self.backupIntervalInSecond) || self.backupIntervalInSecond == 0",
		api.BackupScheduleOrIntervalMessage},
		[2]string{"!has(self.archive) || (has(self.schedule) && self.schedule != '') || (has(self.backupIntervalInSecond) && self.backupIntervalInSecond > 0)",
			api.BackupArchiveNeedsPeriodicMessage})
	props["clientTLSSecret"] = secretName()
	props["verify"] = object(map[string]schema{
		"enabled": withDescription(boolean(), "Read stored backups back and prove they restore; default true for periodic backups, and for one-shot backups with a verify block."),
		"everyNthBackup": withDescription(intRange(0, api.MaxVerifyEveryNthBackup),
			fmt.Sprintf("Periodic backups: verify the first after the schedule starts and then every Nth; 0 means %d.", api.DefaultVerifyEveryNthBackup)),
	})
	props["clusterName"] = clusterNameSchema()
	props["compression"] = compressionSchema()
	props["encryption"] = encryptionSchema()
	spec := withRules(object(props, "storageType"), append(storageRules("storageType"), backupTargetRule)...)

	status := object(map[string]schema{
		"succeeded":       boolean(),
		"Reason":          str(),
		"etcdVersion":     str(),
		"etcdRevision":    integer(),
		"lastSuccessDate": dateTime(),
		"backupPath":      str(),
		"backupSize":      integer(),
		"sha256":          str(),
		"encoding": object(map[string]schema{
			"compression": str(),
			"encryption":  str(),
			"keySecret":   str(),
			"keyID":       str(),
		}),
		"verified": object(map[string]schema{
			"time":       dateTime(),
			"succeeded":  boolean(),
			"reason":     str(),
			"backupPath": str(),
			"revision":   integer(),
			"totalKeys":  integer(),
			"size":       integer(),
			"sha256":     str(),
		}),
		"archive": object(map[string]schema{
			"prefix":       str(),
			"lastRevision": integer(),
			"lastTime":     dateTime(),
			"lagSeconds":   integer(),
			"lagRevisions": integer(),
			"lastGap": object(map[string]schema{
				"from":             integer(),
				"compactedTo":      integer(),
				"when":             dateTime(),
				"snapshotRevision": integer(),
			}),
			"recoveryPoint": object(map[string]schema{
				"revision":         integer(),
				"time":             dateTime(),
				"snapshotRevision": integer(),
			}),
			"drill": object(map[string]schema{
				"time":             dateTime(),
				"result":           str(),
				"reason":           str(),
				"backupPath":       str(),
				"snapshotRevision": integer(),
				"revision":         integer(),
				"revisions":        integer(),
				"keys":             integer(),
				"lastPassedTime":   dateTime(),
			}),
		}),
	})
	// lastSuccessDate is a metav1.Time without omitempty: it is null until the first success.
	ls := status.Properties["lastSuccessDate"]
	ls.Nullable = true
	status.Properties["lastSuccessDate"] = ls

	return newCRD(api.EtcdBackupResourcePlural, api.EtcdBackupResourceKind, api.EtcdBackup{}, backupShortNames,
		rootSchema("EtcdBackup asks for a one-shot or periodic backup of an etcd cluster.", spec, status),
		[]apiextv1.CustomResourceColumnDefinition{
			column("Storage", "string", ".spec.storageType"),
			column("Succeeded", "boolean", ".status.succeeded"),
			column("Revision", "integer", ".status.etcdRevision"),
			column("Last Success", "date", ".status.lastSuccessDate"),
			ageColumn,
			wide(column("Path", "string", ".status.backupPath")),
			wide(column("Reason", "string", ".status.Reason")),
		})
}

// backupScheduleSchema checks a schedule's shape: five fields or a shorthand.
// CEL cannot parse cron, so a field out of range or an unknown time zone is
// admitted and then refused by the backup operator in status.reason.
func backupScheduleSchema() schema {
	return withRules(boundedStr(api.MaxBackupScheduleLength), [2]string{
		`self == '' || self.matches(r'^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches(r'^[^@=\s]+( +[^=\s]+){4}$')`,
		api.BackupScheduleMessage})
}

// pointsNamed counts how many of spec.pointInTime's time, revision and
// latest are set.
const pointsNamed = "((has(self.time) && self.time != '') ? 1 : 0) + ((has(self.revision) && self.revision != 0) ? 1 : 0) + ((has(self.latest) && self.latest) ? 1 : 0)"

// pointInTimeSchema checks spec.pointInTime as EtcdRestore.Validate does.
func pointInTimeSchema() schema {
	return withRules(object(map[string]schema{
		"time": withRules(boundedStr(64), [2]string{
			matches(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$`),
			api.PointInTimeTimeMessage}),
		"revision": nonNegative(),
		"latest":   boolean(),
	}),
		[2]string{pointsNamed + " <= 1", api.PointInTimeOneOfMessage},
		[2]string{pointsNamed + " >= 1", api.PointInTimeRequiredMessage})
}

// EtcdRestore is the definition of etcdrestores.etcd.database.coreos.com.
func EtcdRestore() *apiextv1.CustomResourceDefinition {
	props := sourceSchemas()
	props["backupStorageType"] = enum(storageTypes...)
	props["encryption"] = encryptionSchema()
	props["etcdCluster"] = object(map[string]schema{"name": withRules(boundedStr(253),
		[2]string{"self != ''", "names the EtcdCluster to restore"})}, "name")
	props["pointInTime"] = pointInTimeSchema()
	spec := withRules(object(props, "backupStorageType", "etcdCluster"), storageRules("backupStorageType")...)

	status := object(map[string]schema{
		"succeeded":      boolean(),
		"reason":         str(),
		"phase":          str(),
		"startTime":      dateTime(),
		"completionTime": dateTime(),
		"pointInTime": object(map[string]schema{
			"snapshot":         str(),
			"snapshotRevision": integer(),
			"revision":         integer(),
			"time":             dateTime(),
			"revisions":        integer(),
			"events":           integer(),
			"keys":             integer(),
			"replayed":         boolean(),
			"archiveRevision":  integer(),
			"shortfall":        str(),
		}),
	})
	return newCRD(api.EtcdRestoreResourcePlural, api.EtcdRestoreResourceKind, api.EtcdRestore{}, restoreShortNames,
		rootSchema("EtcdRestore replaces an EtcdCluster with one seeded from a backup.", spec, status,
			[2]string{"self.metadata.name == self.spec.etcdCluster.name",
				"spec.etcdCluster.name must equal the EtcdRestore's name: the restored cluster keeps that name"}),
		[]apiextv1.CustomResourceColumnDefinition{
			column("Phase", "string", ".status.phase"),
			column("Succeeded", "boolean", ".status.succeeded"),
			column("Storage", "string", ".spec.backupStorageType"),
			ageColumn,
			wide(column("Reason", "string", ".status.reason")),
		})
}
