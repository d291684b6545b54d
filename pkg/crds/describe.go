package crds

import (
	"reflect"
	"strings"
)

// describe fills in each property's description from the doc comment of the
// Go field it stores (fieldDocs, generated from pkg/apis and the Kubernetes
// types it embeds), so that kubectl explain documents every field. A
// description written in the schema itself is kept: it is the shorter text
// meant for the schema. Properties with no Go field are left as they are;
// TestEveryPropertyIsDescribed catches them.
func describe(s *schema, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if s.Items != nil && s.Items.Schema != nil {
			describe(s.Items.Schema, t.Elem())
		}
		return
	case reflect.Struct:
	default:
		return
	}
	for name, prop := range s.Properties {
		f, ok := jsonField(t, name)
		// The apiserver refuses anything but a type on metadata; kubectl
		// explain describes it from ObjectMeta itself.
		if !ok || name == "metadata" {
			continue
		}
		if prop.Description == "" {
			prop.Description = fieldDocs[f.owner.PkgPath()+"."+f.owner.Name()+"."+f.Name]
		}
		describe(&prop, f.Type)
		s.Properties[name] = prop
	}
}

type ownedField struct {
	reflect.StructField
	owner reflect.Type
}

// jsonField finds the field of t, or of a struct t inlines, that encodes as name.
func jsonField(t reflect.Type, name string) (ownedField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" && (f.Anonymous || strings.Contains(f.Tag.Get("json"), "inline")) {
			inner := f.Type
			for inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if got, ok := jsonField(inner, name); ok {
					return got, true
				}
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return ownedField{f, t}, true
		}
	}
	return ownedField{}, false
}
