package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentbox/agentbox/sandbox"
)

// LabelNetwork says a sandbox pod's network ("none" or "host"), so
// NetworkPolicies can select the pods they confine.
const LabelNetwork = "dev.agentbox.network"

// LabelValue is how a sandbox label's value appears as a Kubernetes label
// value, which holds at most 63 characters from [A-Za-z0-9._-], starting
// and ending with a letter or digit: the value itself when it fits, else a
// readable stem (other characters become '_') and a hash of the whole
// value, so distinct values stay distinct. Selectors use it
// (`-l dev.agentbox.user=$(LabelValue(user))`); the exact value is in the
// annotation of the same key.
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	stem := []byte(v)
	for i, c := range stem {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			stem[i] = '_'
		}
	}
	s := strings.Trim(string(stem[:min(len(stem), 40)]), "._-")
	if s == "" {
		return "h" + hex.EncodeToString(sum[:10])
	}
	return s + "-" + hex.EncodeToString(sum[:10])
}

// metadata builds a sandbox pod's labels and annotations: the spec's own
// labels, then the runtime's, which a spec cannot override (product,
// instance, run, user, chat, created, network, isolation). Every label value is made
// label-safe (LabelValue) and its exact value kept in the annotation of
// the same key, which is what the reaper reads.
func (r *Runtime) metadata(spec sandbox.Spec, network, isolation string, now time.Time) (labels, annotations map[string]string, err error) {
	exact := map[string]string{}
	for k, v := range spec.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, nil, fmt.Errorf("label key %q is not a valid Kubernetes label key: %s", k, strings.Join(msgs, "; "))
		}
		exact[k] = v
	}
	exact[sandbox.LabelProduct] = ProductLabelValue
	exact[sandbox.LabelInstance] = r.opts.Instance
	exact[sandbox.LabelRun] = r.run
	exact[sandbox.LabelUser] = spec.UserID
	exact[sandbox.LabelChat] = spec.ChatID
	exact[sandbox.LabelCreated] = now.UTC().Format(time.RFC3339)
	exact[LabelNetwork] = network
	exact[sandbox.LabelIsolation] = isolation
	labels = make(map[string]string, len(exact))
	for k, v := range exact {
		labels[k] = LabelValue(v)
	}
	return labels, exact, nil
}

// ownSelector selects the pods of this runtime object (its run).
func (r *Runtime) ownSelector() string {
	return productSelector() + "," + sandbox.LabelInstance + "=" + LabelValue(r.opts.Instance) + "," + sandbox.LabelRun + "=" + LabelValue(r.run)
}

// productSelector selects every sandbox pod of the product.
func productSelector() string { return sandbox.LabelProduct + "=" + ProductLabelValue }
