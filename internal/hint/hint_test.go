package hint

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	names := []string{"temperature", "top_p", "max_tokens", "tools"}
	for _, tt := range []struct{ in, want string }{
		{"temprature", "temperature"}, {"Temperature", "temperature"}, {"max_token", "max_tokens"},
		{"tool", "tools"}, {"connector", ""}, {"", ""},
	} {
		if got := Closest(tt.in, names); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("temprature")
	f.Fuzz(func(t *testing.T, s string) {
		if got := Closest(s, []string{"a", "temperature"}); got != "" && got != "a" && got != "temperature" {
			t.Fatalf("Closest(%q) = %q", s, got)
		}
	})
}
