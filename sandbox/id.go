package sandbox

import "fmt"

// MaxIDLen bounds user and chat ids.
const MaxIDLen = 128

// ValidateID checks that id, a user or chat id (kind names it in the
// message: "user", "chat"), is safe to use as one path component: 1 to
// MaxIDLen characters from [A-Za-z0-9_-], with '@' and '.' allowed inside
// but never first (so never ".", ".." or a hidden name). A bad id yields an
// error wrapping ErrInvalidID that says what is wrong; ids are checked
// before any path is built from them.
func ValidateID(kind, id string) error {
	if kind == "" {
		kind = "id"
	}
	switch {
	case id == "":
		return fmt.Errorf("%s id is empty: %w", kind, ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%s id is %d bytes long, the limit is %d: %w", kind, len(id), MaxIDLen, ErrInvalidID)
	}
	for i, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.' || c == '@':
			if i == 0 {
				return fmt.Errorf("%s id %q starts with %q; ids start with a letter, digit, '_' or '-': %w", kind, id, c, ErrInvalidID)
			}
		default:
			return fmt.Errorf("%s id %q has the character %q at byte %d; allowed are A-Z a-z 0-9 _ - and, not first, . @: %w", kind, id, c, i, ErrInvalidID)
		}
	}
	return nil
}
