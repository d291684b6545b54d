package cluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file carries out the changes nextCAChange chooses. Each reads the
// secret it changes again and writes it as read, so that a change chosen
// from a view older than the secret (another writer, an operator restart
// between the read and the write) is checked against what is stored: a
// step already taken is not taken twice, and a conflict is read again at
// the next pass.

// eventCARotation tells each change of a CA rotation.
const eventCARotation = "CARotation"

// carryOutCAChange makes the change d of a CA rotation.
func (c *Cluster) carryOutCAChange(ctx context.Context, s *snapshot, d caDecision) outcome {
	// Whatever happens, the next pass reads the secrets again, and the
	// operator its own (its trusted CA may have changed).
	c.issued = issuedCache{}
	c.certs.readAt = time.Time{}
	names := s.spec.Spec.TLS.Secrets(c.name)
	now := s.now.UTC().Format(time.RFC3339)
	// A rotation begun while no request is outstanding is the operator's
	// own, for a CA it made nearing its expiry (beginCARotation).
	unasked := s.rotateCARequest == "" || s.rotateCARequest == s.issued.rotation.done
	var err error
	switch d.change {
	case caBegin:
		err = c.updateCASecret(ctx, names.CA, func(sec *corev1.Secret) (bool, error) {
			if sec.Annotations[caRotationStepAnnotation] != "" {
				return false, nil
			}
			next, err := tlsissue.NewCA(operatorCASubject(c.namespace, c.name), s.now)
			if err != nil {
				return false, err
			}
			data, err := next.SecretData()
			if err != nil {
				return false, err
			}
			id := s.rotateCARequest
			if unasked {
				id = "auto-" + s.issued.rotation.caNotAfter.UTC().Format(time.RFC3339)
				sec.Annotations[caRotationUnaskedAnnotation] = "true"
			}
			sec.Data[nextCACertKey], sec.Data[nextCAKeyKey] = data[tlsissue.CACertKey], data[tlsissue.CAKeyKey]
			sec.Annotations[caRotationAnnotation] = id
			sec.Annotations[caRotationStepAnnotation] = string(caStepTrustBoth)
			sec.Annotations[caRotationStartedAnnotation], sec.Annotations[caRotationStepStartedAnnotation] = now, now
			delete(sec.Annotations, caRotationSinceAnnotation)
			return true, nil
		})
	case caWriteTrust:
		err = c.writeTrust(ctx, names.CA, d.target)
	case caMarkSince:
		err = c.updateCASecret(ctx, names.CA, func(sec *corev1.Secret) (bool, error) {
			sec.Annotations[caRotationSinceAnnotation] = s.now.UTC().Format(time.RFC3339)
			return true, nil
		})
	case caNextStep:
		err = c.updateCASecret(ctx, names.CA, func(sec *corev1.Secret) (bool, error) {
			if caStep(sec.Annotations[caRotationStepAnnotation]) != caStepTrustBoth {
				return false, nil
			}
			sec.Annotations[caRotationStepAnnotation] = string(caStepReissue)
			sec.Annotations[caRotationStepStartedAnnotation] = now
			delete(sec.Annotations, caRotationSinceAnnotation)
			return true, nil
		})
	case caRestartMember:
		err = c.restartForCA(ctx, s, d.target)
	case caReissue:
		err = c.reissueFromNext(ctx, s, names.CA, d.target)
	case caAdopt:
		err = c.updateCASecret(ctx, names.CA, func(sec *corev1.Secret) (bool, error) {
			if caStep(sec.Annotations[caRotationStepAnnotation]) != caStepReissue || len(sec.Data[nextCACertKey]) == 0 {
				return false, nil
			}
			// The new CA is the operator's, whoever brought the old one:
			// from now on it is rotated unasked as it nears its expiry.
			if next := firstCertificate(sec.Data[nextCACertKey]); next != nil {
				sec.Annotations[caMadeByOperatorAnnotation] = caFingerprint(next)
			}
			sec.Data[previousCACertKey] = sec.Data[tlsissue.CACertKey]
			sec.Data[tlsissue.CACertKey], sec.Data[tlsissue.CAKeyKey] = sec.Data[nextCACertKey], sec.Data[nextCAKeyKey]
			delete(sec.Data, nextCACertKey)
			delete(sec.Data, nextCAKeyKey)
			sec.Annotations[caRotationStepAnnotation] = string(caStepTrustNew)
			sec.Annotations[caRotationStepStartedAnnotation] = now
			delete(sec.Annotations, caRotationSinceAnnotation)
			return true, nil
		})
	case caFinish:
		err = c.updateCASecret(ctx, names.CA, func(sec *corev1.Secret) (bool, error) {
			if caStep(sec.Annotations[caRotationStepAnnotation]) != caStepTrustNew {
				return false, nil
			}
			// The last request carried out stays the one it was after a
			// rotation the operator began by itself: a request of that
			// value is still done.
			if sec.Annotations[caRotationUnaskedAnnotation] != "true" {
				sec.Annotations[caRotatedAnnotation] = sec.Annotations[caRotationAnnotation]
			}
			sec.Annotations[caLastRotationAnnotation], sec.Annotations[caLastRotatedAnnotation] = sec.Annotations[caRotationAnnotation], now
			for _, k := range []string{caRotationAnnotation, caRotationStepAnnotation, caRotationSinceAnnotation, caRotationStartedAnnotation, caRotationStepStartedAnnotation, caRotationUnaskedAnnotation} {
				delete(sec.Annotations, k)
			}
			delete(sec.Data, previousCACertKey)
			return true, nil
		})
	default:
		return outcome{}
	}
	switch {
	case apierrors.IsConflict(err):
		c.log.WithField("change", d.reason).WithError(err).Info("a secret of the CA rotation changed since it was read; it is read again")
		return outcome{requeue: c.cfg.MinPassInterval}
	case err != nil:
		return outcome{err: err}
	}
	what := map[caChange]string{caBegin: "began: a new CA is in", caWriteTrust: "the trusted CA written into", caMarkSince: "every certificate secret has the step's trusted CA; recorded in",
		caNextStep: "every member read the CAs of both; leaves are next, recorded in", caRestartMember: "restarting member", caReissue: "issued from the new CA:",
		caAdopt: "the new CA is now ca.crt of", caFinish: "done; the old CA is dropped from"}[d.change]
	if d.change == caBegin && unasked {
		what = "began unasked: a new CA is in"
	}
	target := d.target
	if target == "" {
		target = names.CA
	}
	c.log.WithFields(map[string]any{"change": what, "target": target, "why": d.reason}).Info("CA rotation")
	c.tell(corev1.EventTypeNormal, eventCARotation, fmt.Sprintf("CA rotation %s %s (%s)", what, target, d.reason))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// updateCASecret reads the CA secret, lets change edit it (false: nothing
// to do, the step was taken already), and updates it as read.
func (c *Cluster) updateCASecret(ctx context.Context, name string, change func(*corev1.Secret) (bool, error)) error {
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return kubeError("read the CA secret "+name, err)
	}
	sec = sec.DeepCopy()
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	changed, err := change(sec)
	if err != nil {
		return newPassError(problemInternal, "change the CA secret "+name+" for its rotation", err)
	}
	if !changed {
		return nil
	}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return kubeError("update the CA secret "+name, err)
	}
	return nil
}

// stepTrust is the trusted CA the CA secret's step gives certificate
// secrets: the bundle old+new, then the new CA alone.
func stepTrust(sec *corev1.Secret) ([]byte, error) {
	switch caStep(sec.Annotations[caRotationStepAnnotation]) {
	case caStepTrustBoth, caStepReissue:
		if len(sec.Data[nextCACertKey]) == 0 {
			return nil, fmt.Errorf("no %s", nextCACertKey)
		}
		return tlsissue.Bundle(sec.Data[tlsissue.CACertKey], sec.Data[nextCACertKey]), nil
	case caStepTrustNew:
		return sec.Data[tlsissue.CACertKey], nil
	}
	return nil, fmt.Errorf("no CA rotation step recorded")
}

// writeTrust gives certificate secret target the step's trusted CA. The
// step's since is cleared first: a member started before this write may
// not have the files it brings.
func (c *Cluster) writeTrust(ctx context.Context, caName, target string) error {
	var trust []byte
	if err := c.updateCASecret(ctx, caName, func(sec *corev1.Secret) (bool, error) {
		var err error
		if trust, err = stepTrust(sec); err != nil {
			return false, err
		}
		_, had := sec.Annotations[caRotationSinceAnnotation]
		delete(sec.Annotations, caRotationSinceAnnotation)
		return had, nil
	}); err != nil {
		return err
	}
	return c.updateLeafSecret(ctx, target, func(k tlsissue.Kind, data map[string][]byte) (map[string][]byte, error) {
		return k.Trusting(data, trust), nil
	})
}

// reissueFromNext issues certificate secret target again from the new CA,
// keeping the trusted CA the step gave it.
func (c *Cluster) reissueFromNext(ctx context.Context, s *snapshot, caName, target string) error {
	sec, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, caName, metav1.GetOptions{})
	if err != nil {
		return kubeError("read the CA secret "+caName, err)
	}
	next, err := tlsissue.CAFromSecret(map[string][]byte{tlsissue.CACertKey: sec.Data[nextCACertKey], tlsissue.CAKeyKey: sec.Data[nextCAKeyKey]}, s.now)
	if err != nil {
		return newPassError(problemTLSCertificate, "use the new CA of CA secret "+caName, err)
	}
	trust, err := stepTrust(sec)
	if err != nil {
		return newPassError(problemTLSCertificate, "use CA secret "+caName, err)
	}
	return c.updateLeafSecret(ctx, target, func(k tlsissue.Kind, data map[string][]byte) (map[string][]byte, error) {
		issued, err := next.Issue(k, c.issuedCluster(s), s.now, s.spec.Spec.TLS.Issued.Validity())
		if err != nil {
			return nil, err
		}
		out := maps.Clone(data)
		maps.Copy(out, k.Trusting(issued, trust))
		return out, nil
	})
}

// updateLeafSecret reads certificate secret name, lets change make its new
// data (keys a user added are kept by change), and updates it as read.
func (c *Cluster) updateLeafSecret(ctx context.Context, name string, change func(tlsissue.Kind, map[string][]byte) (map[string][]byte, error)) error {
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return kubeError("read secret "+name, err)
	}
	names := c.latest.Spec.TLS.Secrets(c.name)
	kind, found := tlsissue.Peer, false
	for _, k := range tlsissue.Kinds {
		if secretOf(names, k) == name {
			kind, found = k, true
		}
	}
	if !found {
		return newPassError(problemInternal, "change secret "+name+" for the CA rotation", fmt.Errorf("not a certificate secret of issued TLS"))
	}
	sec = sec.DeepCopy()
	data, err := change(kind, sec.Data)
	if err != nil {
		return newPassError(problemInternal, "change secret "+name+" for the CA rotation", err)
	}
	sec.Data = data
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return kubeError("update secret "+name, err)
	}
	return nil
}

// restartForCA deletes the pod of member name, the one seen by the pass, so
// that the pass makes it again and its etcd reads its trusted CA: on its
// claim, in place; on an emptyDir, as a replacement member.
func (c *Cluster) restartForCA(ctx context.Context, s *snapshot, name string) error {
	return c.deleteSeenPod(ctx, s, name, "for its etcd to read its trusted CA")
}

// deleteSeenPod deletes the pod of member name that the pass saw (its UID as
// precondition, so that a pod made again meanwhile is left alone); a pod
// already gone is no error. why ends the error's message.
func (c *Cluster) deleteSeenPod(ctx context.Context, s *snapshot, name, why string) error {
	m, ok := s.views[name]
	if !ok || m.pod == nil {
		return nil
	}
	uid := m.pod.UID
	err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError("delete pod "+name+" "+why, err)
	}
	return nil
}
