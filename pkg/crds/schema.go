package crds

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// A few constructors keep the schemas below readable as a tree.

type schema = apiextv1.JSONSchemaProps

func object(props map[string]schema, required ...string) schema {
	return schema{Type: "object", Properties: props, Required: required}
}

// openObject keeps fields the schema does not list. It is used for embedded core
// types (affinity, security context, ...) whose full schemas would be thousands of
// lines; the apiserver and the kubelet validate them when the pod is created.
func openObject(props map[string]schema) schema {
	s := object(props)
	s.XPreserveUnknownFields = ptr(true)
	return s
}

func stringMap() schema {
	return schema{Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{
		Allows: true, Schema: &schema{Type: "string"},
	}}
}

func str() schema { return schema{Type: "string"} }

// boundedStr is a string short enough for CEL rules to stay within their cost budget.
func boundedStr(max int64) schema { return schema{Type: "string", MaxLength: &max} }

func enum(values ...string) schema {
	s := str()
	for _, v := range values {
		s.Enum = append(s.Enum, apiextv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return s
}

func boolean() schema { return schema{Type: "boolean"} }

func integer() schema { return schema{Type: "integer"} }

func intRange(min, max float64) schema {
	s := integer()
	s.Minimum = &min
	if max >= min {
		s.Maximum = &max
	}
	return s
}

func nonNegative() schema { return intRange(0, -1) }

func array(items schema) schema {
	return schema{Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &items}}
}

func dateTime() schema { return schema{Type: "string", Format: "date-time"} }

// quantity is a resource quantity such as 500m or 1Gi, given as a number or a string.
func quantity() schema {
	return schema{
		XIntOrString: true,
		AnyOf:        []schema{{Type: "integer"}, {Type: "string"}},
		Pattern:      `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
	}
}

func quantityMap() schema {
	q := quantity()
	return schema{Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &q}}
}

// withRules attaches CEL rules; each rule is a pair of expression and message.
func withRules(s schema, rules ...[2]string) schema {
	for _, r := range rules {
		s.XValidations = append(s.XValidations, apiextv1.ValidationRule{Rule: r[0], Message: r[1]})
	}
	return s
}

func withDescription(s schema, d string) schema {
	s.Description = d
	return s
}

func ptr[T any](v T) *T { return &v }
