package agentcli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/sandbox"
)

// This file is where a chat's CLI state lives in its workspace (the only
// place that outlives a sandbox): one folder per CLI and assistant, with
// the CLI's homes (Profile.Homes) and the record of its session.

// StateRoot holds the CLI state of every chat of a workspace, one folder
// per CLI and assistant (StateDir).
const StateRoot = ".agentbox"

// StateDir returns the workspace folder (relative to the workspace root)
// of an assistant's state for cli: its CLI homes and the session record.
// One assistant's sessions never reach another's run.
func StateDir(cli, assistantID string) string {
	return StateRoot + "/" + cli + "/assistants/" + FolderName(assistantID)
}

var safeFolder = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// folderNamespace seeds the folder names of ids that are not safe ones.
var folderNamespace = uuid.MustParse("8f0e4a52-61b3-4c1e-9a77-2f5d9c0b3e18")

// FolderName is id when it is a safe folder name, else a UUID v5 of it.
func FolderName(id string) string {
	if safeFolder.MatchString(id) {
		return id
	}
	return "id-" + uuid.NewSHA1(folderNamespace, []byte(id)).String()
}

// SessionFile is the state folder's record of the chat's session
// (Profile.Sessions).
const SessionFile = "session.json"

// sessionPattern is what a session id read back from the workspace (which
// the agent can write) must look like to reach a command line.
var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// sessionRecord is the content of a state folder's SessionFile. The
// assistant is recorded for a state folder that several share; a record
// without one is read as the folder's assistant's.
type sessionRecord struct {
	AssistantID string `json:"assistant_id,omitempty"`
	ChatID      string `json:"chat_id"`
	SessionID   string `json:"session_id"`
}

// ReadSession returns the session the driver resumes, "" when the state
// folder records none of this assistant and chat.
func ReadSession(ctx context.Context, ws *sandbox.Workspace, state, assistantID, chatID string) string {
	b, err := ws.ReadFile(ctx, state+"/"+SessionFile, 64<<10)
	if err != nil {
		return ""
	}
	var s sessionRecord
	if json.Unmarshal(b, &s) != nil || s.ChatID != chatID || (s.AssistantID != "" && s.AssistantID != assistantID) ||
		!sessionPattern.MatchString(s.SessionID) {
		return ""
	}
	return s.SessionID
}

// WriteSession records the session the chat's next run resumes.
func WriteSession(ctx context.Context, ws *sandbox.Workspace, state, assistantID, chatID, id string) error {
	if !sessionPattern.MatchString(id) {
		return fmt.Errorf("session id %q is not one to keep", id)
	}
	b, _ := json.Marshal(sessionRecord{AssistantID: assistantID, ChatID: chatID, SessionID: id})
	return ws.WriteFile(ctx, state+"/"+SessionFile, append(b, '\n'), 0o600)
}
