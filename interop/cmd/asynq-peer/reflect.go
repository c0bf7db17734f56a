package main

import "reflect"

// reflectTypeName returns the Go type of v as printed by %T, e.g.
// "*errors.TaskAlreadyArchivedError".
func reflectTypeName(v any) string {
	if v == nil {
		return ""
	}
	return reflect.TypeOf(v).String()
}
