#include "controller/tenants.h"

#include <set>
#include <sstream>
#include <stdexcept>
#include <limits>
#include <toml++/toml.h>

namespace atp::controller {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

template <typename T>
T limit(const toml::table& t, const char* key, const std::string& where) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return 0;
  const auto value = node->value<std::int64_t>();
  if (!value || *value < 0 || static_cast<std::uint64_t>(*value) > std::numeric_limits<T>::max())
    fail(where, std::string(key) + " must be a whole number from 0 (no limit)");
  return static_cast<T>(*value);
}

}  // namespace

std::string without_tenants(const std::string& fabric_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(fabric_text, origin);
  } catch (const toml::parse_error& e) {
    fail(origin, std::string(e.description()));
  }
  if (!root.contains("tenant")) return fabric_text;
  root.erase("tenant");
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

void require_distinct_credentials(const std::vector<Tenant>& tenants, const std::string& admit,
                                  const std::string& operator_credential) {
  std::vector<std::pair<std::string, std::string>> named;  // (credential, whose)
  for (const Tenant& t : tenants) named.emplace_back(t.credential, "tenant '" + t.name + "'");
  named.emplace_back(admit, "the admission credential");
  named.emplace_back(operator_credential, "the operator's");
  for (std::size_t a = 0; a < named.size(); ++a)
    for (std::size_t b = a + 1; b < named.size(); ++b)
      if (!named[a].first.empty() && named[a].first == named[b].first)
        throw std::invalid_argument(named[a].second + " and " + named[b].second +
                                    " have the same credential: each must have its own");
}

std::vector<Tenant> parse_tenants(const std::string& fabric_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(fabric_text, origin);
  } catch (const toml::parse_error& e) {
    fail(origin, std::string(e.description()));
  }
  std::vector<Tenant> tenants;
  const toml::array* tables = root["tenant"].as_array();
  if (tables == nullptr) return tenants;
  std::set<std::string> names;
  for (const toml::node& node : *tables) {
    const toml::table* t = node.as_table();
    if (t == nullptr) fail(origin, "[[tenant]] must be a table");
    Tenant tenant;
    tenant.name = t->get("name") ? t->get("name")->value_or(std::string()) : std::string();
    if (tenant.name.empty()) fail(origin, "a [[tenant]] needs a name");
    const std::string where = origin + " tenant '" + tenant.name + "'";
    if (!names.insert(tenant.name).second) fail(where, "named twice");
    tenant.credential_file =
        t->get("credential_file") ? t->get("credential_file")->value_or(std::string()) : "";
    if (tenant.credential_file.empty())
      fail(where, "needs a credential_file (its first line: the tenant's admission credential)");
    tenant.quota.max_jobs = limit<std::uint32_t>(*t, "max_jobs", where);
    tenant.quota.max_aggregators = limit<std::uint64_t>(*t, "max_aggregators", where);
    tenant.quota.max_ps_memory_mb = limit<std::uint64_t>(*t, "max_ps_memory_mb", where);
    tenants.push_back(std::move(tenant));
  }
  return tenants;
}

}  // namespace atp::controller
