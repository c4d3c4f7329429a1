package e2etest

// Bearer tokens of the test apps whose auth block is AuthJSONC.
const (
	TokenAlice    = "alice-token-0123456789"
	TokenBob      = "bob-token-0123456789"
	TokenOperator = "operator-token-0123456789"
)

// AuthJSONC is the auth block (an app.jsonc field) of the test apps: the
// users alice and bob and the metrics token, read from the environment
// that TokenEnv gives the server.
const AuthJSONC = `"auth": {"tokens": [{"token": "$ENV.T_ALICE", "user": "alice"}, {"token": "$ENV.T_BOB", "user": "bob"}], "metrics_token": "$ENV.T_OPERATOR"}`

// TokenEnv is the environment AuthJSONC reads the tokens from.
func TokenEnv() []string {
	return []string{"T_ALICE=" + TokenAlice, "T_BOB=" + TokenBob, "T_OPERATOR=" + TokenOperator}
}
