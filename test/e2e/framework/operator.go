package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorDeployment is the name example/deployment.yaml gives the operator.
const OperatorDeployment = "etcd-operator"

// OperatorReadyTimeout bounds the wait for an operator pod to pass its /readyz
// probe: image already on the node, CRD install, informer sync.
const OperatorReadyTimeout = 2 * time.Minute

// Install says how to install the operator, one of the ways README tells users.
type Install struct {
	// Namespaced grants a Role instead of a ClusterRole (create_role.sh
	// --namespaced), applies example/crd/ as the admin, and runs the operator with
	// --create-crd=false, which needs no cluster-scoped permission.
	Namespaced bool
	// ClusterWide runs the operator with --cluster-wide (the line that is commented
	// out in example/deployment.yaml).
	ClusterWide bool
	// PendingTimeout, when set, is given as --pending-timeout, for tests that
	// cannot wait the default 5 minutes for a pod that never starts.
	PendingTimeout time.Duration
	// ChaosLevel, when set, is given as --chaos-level: the operator kills its
	// namespace's etcd pods at random (pkg/chaos).
	ChaosLevel int
	// LogLevel, when set, is given as --log-level.
	LogLevel string
	// Profiling runs the operator with --profiling: /debug/pprof/ on its
	// metrics port.
	Profiling bool
}

// Operator is an installed etcd-operator.
type Operator struct {
	Namespace string
	// RBACName names the (Cluster)Role and its binding. Cluster-scoped objects
	// outlive the namespace, so each install gets its own name and removes it.
	RBACName   string
	Namespaced bool
}

// InstallOperator installs the operator in ns exactly as README does, with the
// example files unmodified: example/rbac/create_role.sh, then
// `kubectl create -f example/deployment.yaml`. Flags the example leaves at their
// defaults are changed by piping the example through sed, as a user would. It waits
// for the operator pod to be Ready.
func (f *Framework) InstallOperator(ctx context.Context, ns string, in Install) (*Operator, error) {
	op := &Operator{Namespace: ns, RBACName: "e2e-" + ns, Namespaced: in.Namespaced}
	args := []string{f.Env.Path("example", "rbac", "create_role.sh"),
		"--namespace=" + ns, "--role-name=" + op.RBACName, "--role-binding-name=" + op.RBACName}
	if in.Namespaced {
		args = append(args, "--namespaced")
	}
	if _, err := f.Run(ctx, Cmd{Name: "bash", Args: args}); err != nil {
		return nil, fmt.Errorf("create_role.sh: %w", err)
	}
	if in.Namespaced {
		if _, err := f.Kubectl(ctx, "apply", "-f", f.Env.Path("example", "crd")+"/"); err != nil {
			return nil, fmt.Errorf("apply example/crd: %w", err)
		}
	}
	var sed []string
	if in.Namespaced {
		sed = append(sed, "s/- --create-crd=true/- --create-crd=false/")
	}
	if in.ClusterWide {
		sed = append(sed, "s/# - --cluster-wide/- --cluster-wide/")
	}
	if in.PendingTimeout > 0 {
		sed = append(sed, "s/^\\( *\\)- --create-crd=.*$/&\\n\\1- --pending-timeout="+in.PendingTimeout.String()+"/")
	}
	if in.ChaosLevel > 0 {
		sed = append(sed, fmt.Sprintf("s/^\\( *\\)- --create-crd=.*$/&\\n\\1- --chaos-level=%d/", in.ChaosLevel))
	}
	if in.LogLevel != "" {
		sed = append(sed, "s/^\\( *\\)- --create-crd=.*$/&\\n\\1- --log-level="+in.LogLevel+"/")
	}
	if in.Profiling {
		sed = append(sed, "s/^\\( *\\)- --create-crd=.*$/&\\n\\1- --profiling/")
	}
	if f.Env.OperatorImage != "" {
		sed = append(sed, "s|image: openetcd/etcd-operator:.*|image: "+f.Env.OperatorImage+"|")
	}
	if err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "deployment.yaml"), sed...); err != nil {
		return nil, err
	}
	if err := f.WaitDeploymentReady(ctx, ns, OperatorDeployment, 1, OperatorReadyTimeout); err != nil {
		return op, err
	}
	return op, nil
}

// CreateFromExample runs `kubectl create -f <file> -n ns`, or, with sed
// expressions, `sed -e ... <file> | kubectl create -f - -n ns`. Every expression
// must change something: an example that no longer contains the line the suite
// edits has to fail loudly, not deploy something else.
func (f *Framework) CreateFromExample(ctx context.Context, ns, file string, sed ...string) error {
	if len(sed) == 0 {
		if _, err := f.Kubectl(ctx, "create", "-n", ns, "-f", file); err != nil {
			return fmt.Errorf("kubectl create -f %s: %w", file, err)
		}
		return nil
	}
	orig, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var args []string
	for _, e := range sed {
		one, err := f.Run(ctx, Cmd{Name: "sed", Args: []string{"-e", e, file}})
		if err != nil {
			return err
		}
		if one == string(orig) {
			return fmt.Errorf("sed %q changes nothing in %s: the example changed, update the suite", e, file)
		}
		args = append(args, "-e", e)
	}
	manifest, err := f.Run(ctx, Cmd{Name: "sed", Args: append(args, file)})
	if err != nil {
		return err
	}
	if _, err := f.KubectlStdin(ctx, manifest, "create", "-n", ns, "-f", "-"); err != nil {
		return fmt.Errorf("sed %v %s | kubectl create -f -: %w", sed, file, err)
	}
	return nil
}

// Uninstall removes the cluster-scoped RBAC objects of the install; the namespace's
// deletion takes the rest.
func (op *Operator) Uninstall(ctx context.Context, f *Framework) error {
	if op.Namespaced {
		return nil
	}
	var errs []string
	if err := f.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, op.RBACName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err.Error())
	}
	if err := f.Kube.RbacV1().ClusterRoles().Delete(ctx, op.RBACName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove RBAC %s: %s", op.RBACName, strings.Join(errs, "; "))
	}
	return nil
}

// DeploymentPods lists the live pods a Deployment selects.
func (f *Framework) DeploymentPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	d, err := f.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WaitDeploymentReady waits until the Deployment has exactly n live pods, all
// Ready (for an operator that means its /readyz answers: it may take its lock,
// leading or standing by). A pod that crashes is reported with its last log lines right away
// instead of after the timeout.
func (f *Framework) WaitDeploymentReady(ctx context.Context, ns, name string, n int, timeout time.Duration) error {
	return WaitFor(ctx, timeout, Poll, fmt.Sprintf("%d Ready pod(s) of deployment %s/%s", n, ns, name), func(ctx context.Context) (bool, string, error) {
		pods, err := f.DeploymentPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		live := LivePods(pods)
		for _, p := range live {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 || (cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff") {
					logs, _ := f.Kubectl(ctx, "logs", "-n", ns, p.Name, "--previous", "--tail=30")
					return false, "", fmt.Errorf("pod %s of %s restarted (%d restarts); last log lines:\n%s", p.Name, name, cs.RestartCount, logs)
				}
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImageNeverPull" || w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					return false, "", fmt.Errorf("pod %s cannot get its image (%s: %s): build and import it with `bash hack/build-image.sh && sudo bash hack/local-cluster/load-image.sh`", p.Name, w.Reason, w.Message)
				}
			}
		}
		return len(live) == n && len(ReadyPods(pods)) == n, DescribePods(pods), nil
	})
}

// ScaleDeployment runs `kubectl scale`.
func (f *Framework) ScaleDeployment(ctx context.Context, ns, name string, replicas int) error {
	_, err := f.Kubectl(ctx, "scale", "-n", ns, "deployment/"+name, fmt.Sprintf("--replicas=%d", replicas))
	return err
}

// WaitDeploymentScaledDown waits until no pod of the Deployment is left at all,
// terminating ones included: an operator pod that is shutting down may still act.
func (f *Framework) WaitDeploymentScaledDown(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, Poll, fmt.Sprintf("no pod of deployment %s/%s", ns, name), func(ctx context.Context) (bool, string, error) {
		pods, err := f.DeploymentPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(pods) == 0, DescribePods(pods), nil
	})
}

// DeploymentLogs is the log of every pod of the Deployment, with the previous
// container's log where one restarted.
func (f *Framework) DeploymentLogs(ctx context.Context, ns, name string) string {
	pods, err := f.DeploymentPods(ctx, ns, name)
	if err != nil {
		return fmt.Sprintf("(cannot list pods of %s/%s: %v)", ns, name, err)
	}
	if len(pods) == 0 {
		return fmt.Sprintf("(no pod of deployment %s/%s)", ns, name)
	}
	var b strings.Builder
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				out, err := f.Kubectl(ctx, "logs", "-n", ns, p.Name, "-c", cs.Name, "--previous")
				fmt.Fprintf(&b, "==== %s/%s (previous container)\n%s", p.Name, cs.Name, out)
				if err != nil {
					fmt.Fprintf(&b, "(%v)\n", err)
				}
			}
		}
		out, err := f.Kubectl(ctx, "logs", "-n", ns, p.Name, "--all-containers")
		fmt.Fprintf(&b, "==== %s\n%s", p.Name, out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

// KeepOnHostNode keeps a Deployment's pods on the host's node, where the
// control plane runs, and waits until its n pods are Ready there. On a cluster
// of several nodes the tests stop, lose, cut off and drain the other nodes to
// see what the members on them go through; an operator on one of them would be
// lost with them, which is not what those tests look at.
func (f *Framework) KeepOnHostNode(ctx context.Context, ns, deployment string, n int) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":%q}}}}}`, f.Env.NodeName)
	if _, err := f.Kubectl(ctx, "-n", ns, "patch", "deployment", deployment, "--type=strategic", "-p", patch); err != nil {
		return fmt.Errorf("keep %s/%s on node %s: %w", ns, deployment, f.Env.NodeName, err)
	}
	if _, err := f.Kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+deployment, "--timeout="+OperatorReadyTimeout.String()); err != nil {
		return err
	}
	return f.WaitDeploymentReady(ctx, ns, deployment, n, OperatorReadyTimeout)
}
