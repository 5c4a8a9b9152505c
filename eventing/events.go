package eventing

import "slices"

// available is privacyIDEA's event names in its registration order
// (section 7.1 of the admin-config spec).
var available = []string{
	"auth", "ttype",
	"validate_check", "validate_triggerchallenge", "validate_poll_transaction", "validate_offlinerefill",
	"token_init", "token_list", "token_info", "token_assign", "token_unassign", "token_assign_group",
	"token_unassign_group", "token_delete", "token_enable", "token_disable", "token_revoke", "token_reset",
	"token_resync", "token_set", "token_setpin", "token_setrandompin", "token_realm", "token_copypin",
	"token_copyuser", "token_lost", "token_load", "token_getserial", "token_getchallenges",
	"token_cancelchallenge",
	"user_list", "user_add", "user_update", "user_delete", "user_settings_get", "user_settings_set",
	"user_settings_delete",
	"set_custom_user_attribute", "get_user_attribute", "get_user_internal_attribute", "get_editable_attributes",
	"delete_custom_user_attribute",
	"serviceid_add", "serviceid_list", "serviceid_delete",
	"tokengroup_add", "tokengroup_list", "tokengroup_delete",
	"subscription_get", "subscription_status", "subscription_save", "subscription_delete",
	"api_client_add", "api_client_list", "api_client_edit", "api_client_rotate", "api_client_delete",
	"remembered_device_list", "remembered_device_revoke", "remembered_device_revoke_all",
	"remembered_device_revoke_bulk",
	"container_init", "container_delete", "container_assign", "container_unassign", "container_add_token",
	"container_remove_token", "container_set_description", "container_set_states", "container_set_realms",
	"container_register_initialize", "container_register_finalize", "container_unregister",
	"container_synchronize", "container_create_challenge", "container_init_rollover",
}

// Available returns the event names of GET /event/available: privacyIDEA's
// names in its registration order, those of them that the library fires
// (Config.Events; all when that is nil).
func (s *Service) Available() []string {
	if s.cfg.Events == nil {
		return slices.Clone(available)
	}
	out := []string{}
	for _, e := range available {
		if slices.Contains(s.cfg.Events, e) {
			out = append(out, e)
		}
	}
	return out
}
