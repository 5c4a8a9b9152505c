package policy

// AgentName exposes agentName to the tests.
var AgentName = agentName
