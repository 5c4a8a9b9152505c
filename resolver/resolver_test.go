package resolver_test

import (
	"maps"
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

func TestInfoStrings(t *testing.T) {
	got := resolver.Info{
		"email":  "a@example.org",
		"mobile": []string{"+49170111", "+49170222"},
		"phone":  []any{"+4930111", 7},
		"groups": []string{},
		"uid":    1000,
	}.Strings()
	want := map[string]string{"email": "a@example.org", "mobile": "+49170111", "phone": "+4930111"}
	if !maps.Equal(got, want) {
		t.Fatalf("Strings() = %v, want %v", got, want)
	}
}
