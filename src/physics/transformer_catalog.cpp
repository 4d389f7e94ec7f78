// Transformer architectures: parsing data/models/<id>.json, the built-in
// catalog, lookup, and parameter counts.
#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "embedded_data.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::physics {

namespace {

using model::InputError;
using nlohmann::json;

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const json& Field(const json& doc, const std::string& field, const std::string& source) {
  const auto it = doc.find(field);
  if (it == doc.end()) throw InputError(source + ": missing field '" + field + "'");
  return *it;
}

std::string StringField(const json& doc, const std::string& field, const std::string& source) {
  const json& value = Field(doc, field, source);
  if (!value.is_string() || value.get<std::string>().empty()) {
    throw InputError(source + ": field '" + field + "' must be a non-empty string");
  }
  return value.get<std::string>();
}

int PositiveIntField(const json& doc, const std::string& field, const std::string& source) {
  const json& value = Field(doc, field, source);
  if (!value.is_number_integer() || value.get<long long>() <= 0 ||
      value.get<long long>() > 1'000'000'000) {
    throw InputError(source + ": field '" + field + "' must be a whole number > 0 (got " +
                     model::Excerpt(value) + ")");
  }
  return static_cast<int>(value.get<long long>());
}

bool BoolField(const json& doc, const std::string& field, const std::string& source) {
  const json& value = Field(doc, field, source);
  if (!value.is_boolean()) {
    throw InputError(source + ": field '" + field + "' must be true or false (got " +
                     model::Excerpt(value) + ")");
  }
  return value.get<bool>();
}

// A string field that must be one of `names`; returns its index.
size_t ChoiceField(const json& doc, const std::string& field, const std::string& source,
                   std::initializer_list<const char*> names) {
  const std::string value = StringField(doc, field, source);
  size_t index = 0;
  std::string listed;
  for (const char* name : names) {
    if (value == name) return index;
    listed += (index++ == 0 ? "" : ", ") + std::string(name);
  }
  throw InputError(source + ": field '" + field + "' is '" + value + "'; use one of " + listed);
}

void CheckKnownFields(const json& doc, const std::string& source) {
  static const std::set<std::string> kKnown = {"id",
                                               "name",
                                               "aliases",
                                               "layers",
                                               "hidden",
                                               "ffn_hidden",
                                               "heads",
                                               "kv_heads",
                                               "vocab",
                                               "mlp",
                                               "norm",
                                               "position",
                                               "tied_embeddings",
                                               "embedding_norm",
                                               "linear_bias",
                                               "seq_length",
                                               "notes",
                                               "sources",
                                               "head_transform",
                                               "token_types",
                                               "decoder_layers",
                                               "attention_head_dim"};
  for (const auto& [key, value] : doc.items()) {
    if (kKnown.count(key) == 0) {
      throw InputError(source + ": unknown field '" + key +
                       "' (known: id, name, aliases, layers, hidden, ffn_hidden, heads, "
                       "kv_heads, vocab, mlp, norm, position, tied_embeddings, embedding_norm, "
                       "linear_bias, seq_length, head_transform, token_types, decoder_layers, "
                       "attention_head_dim, notes, sources)");
    }
  }
}

std::vector<TransformerConfig> LoadCatalog() {
  std::vector<TransformerConfig> catalog;
  std::set<std::string> names;  // ids and aliases, unique across the catalog
  for (const EmbeddedFile& file : EmbeddedModelFiles()) {
    const std::string source = "data/models/" + std::string(file.name);
    TransformerConfig config = ParseTransformerConfig(std::string(file.content), source);
    if (std::string(file.name) != config.id + ".json") {
      throw InputError(source + ": field 'id' must match the file name (got '" + config.id + "')");
    }
    std::vector<std::string> keys = config.aliases;
    keys.push_back(config.id);
    for (const std::string& key : keys) {
      if (!names.insert(key).second) {
        throw InputError(source + ": id or alias '" + key + "' is already used by another model");
      }
    }
    catalog.push_back(std::move(config));
  }
  std::sort(catalog.begin(), catalog.end(),
            [](const TransformerConfig& a, const TransformerConfig& b) { return a.id < b.id; });
  return catalog;
}

}  // namespace

double TransformerConfig::LayerParameters(bool cross_attention) const {
  const double h = hidden, f = ffn_hidden, q = q_dim(), kv = kv_dim();
  const double attention = h * (q + 2 * kv) + q * h;  // QKV and output projections
  const double attention_bias = (q + 2 * kv) + h;
  const int attentions = cross_attention ? 2 : 1;
  double params = attentions * attention;
  params += (mlp == MlpKind::kSwiglu ? 3 : 2) * h * f;                  // up (+gate) and down
  const double norm_params = norm == NormKind::kLayerNorm ? 2 * h : h;  // scale (+shift)
  params += (attentions + 1) * norm_params;
  if (linear_bias)
    params += attentions * attention_bias + (mlp == MlpKind::kSwiglu ? 2 : 1) * f + h;
  return params;
}

double TransformerConfig::Parameters() const {
  const double h = hidden;
  const double norm_params = norm == NormKind::kLayerNorm ? 2 * h : h;
  double params = layers * LayerParameters() + decoder_layers * LayerParameters(true);
  if (decoder_layers > 0) params += norm_params;                   // the encoder's final norm
  params += static_cast<double>(vocab) * h;                        // token embedding
  if (!tied_embeddings) params += static_cast<double>(vocab) * h;  // LM head
  if (position == PositionKind::kLearned) params += static_cast<double>(seq_length) * h;
  if (embedding_norm) params += norm_params;
  params += static_cast<double>(token_types) * h;
  if (head_transform) {
    params += h * h + norm_params;         // dense and norm
    if (linear_bias) params += h + vocab;  // the dense's and the LM head's biases
  } else {
    params += norm_params;  // final norm
  }
  return params;
}

TransformerConfig ParseTransformerConfig(const std::string& json_text, const std::string& source) {
  const json doc = model::ParseJsonBounded(json_text, source);
  if (!doc.is_object()) throw InputError(source + ": expected a JSON object");
  CheckKnownFields(doc, source);

  TransformerConfig c;
  c.id = Lower(StringField(doc, "id", source));
  c.name = StringField(doc, "name", source);
  if (const auto it = doc.find("aliases"); it != doc.end()) {
    if (!it->is_array()) throw InputError(source + ": field 'aliases' must be a list of strings");
    for (const json& alias : *it) {
      if (!alias.is_string() || alias.get<std::string>().empty()) {
        throw InputError(source + ": field 'aliases' must be a list of non-empty strings");
      }
      c.aliases.push_back(Lower(alias.get<std::string>()));
    }
  }
  c.layers = PositiveIntField(doc, "layers", source);
  c.hidden = PositiveIntField(doc, "hidden", source);
  c.ffn_hidden = PositiveIntField(doc, "ffn_hidden", source);
  c.heads = PositiveIntField(doc, "heads", source);
  c.kv_heads = PositiveIntField(doc, "kv_heads", source);
  c.vocab = PositiveIntField(doc, "vocab", source);
  c.mlp = static_cast<MlpKind>(ChoiceField(doc, "mlp", source, {"gelu", "swiglu", "relu"}));
  c.norm = static_cast<NormKind>(ChoiceField(doc, "norm", source, {"layernorm", "rmsnorm"}));
  c.position = static_cast<PositionKind>(
      ChoiceField(doc, "position", source, {"learned", "rope", "alibi", "relative"}));
  c.tied_embeddings = BoolField(doc, "tied_embeddings", source);
  c.embedding_norm = BoolField(doc, "embedding_norm", source);
  c.linear_bias = BoolField(doc, "linear_bias", source);
  c.seq_length = PositiveIntField(doc, "seq_length", source);
  if (doc.contains("head_transform")) c.head_transform = BoolField(doc, "head_transform", source);
  auto optional_count = [&](const char* field, int* into) {
    if (const auto it = doc.find(field); it != doc.end()) {
      if (!it->is_number_integer() || it->get<long long>() < 0 ||
          it->get<long long>() > 1'000'000) {
        throw InputError(source + ": field '" + field +
                         "' must be a whole number 0..1000000 (got " + model::Excerpt(*it) + ")");
      }
      *into = static_cast<int>(it->get<long long>());
    }
  };
  optional_count("token_types", &c.token_types);
  optional_count("decoder_layers", &c.decoder_layers);
  optional_count("attention_head_dim", &c.attention_head_dim);
  if (c.attention_head_dim == 0 && c.hidden % c.heads != 0) {
    throw InputError(source + ": field 'hidden' (" + std::to_string(c.hidden) +
                     ") must be a multiple of 'heads' (" + std::to_string(c.heads) +
                     "), or give 'attention_head_dim'");
  }
  if (c.heads % c.kv_heads != 0) {
    throw InputError(source + ": field 'kv_heads' (" + std::to_string(c.kv_heads) +
                     ") must divide 'heads' (" + std::to_string(c.heads) + ")");
  }
  if (const auto it = doc.find("sources"); it != doc.end()) {
    if (!it->is_object()) throw InputError(source + ": field 'sources' must be an object");
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        throw InputError(source + ": sources." + key + " must be a string (a citation)");
      }
      c.sources[key] = value.get<std::string>();
    }
  }
  return c;
}

const std::vector<TransformerConfig>& TransformerCatalog() {
  static const std::vector<TransformerConfig> catalog = LoadCatalog();
  return catalog;
}

std::string KnownTransformerIds() {
  std::string out;
  for (const TransformerConfig& c : TransformerCatalog()) out += (out.empty() ? "" : ", ") + c.id;
  return out;
}

const TransformerConfig& FindTransformer(std::string_view id_or_alias) {
  const std::string wanted = Lower(id_or_alias);
  for (const TransformerConfig& c : TransformerCatalog()) {
    if (c.id == wanted) return c;
    if (std::find(c.aliases.begin(), c.aliases.end(), wanted) != c.aliases.end()) return c;
  }
  throw InputError("unknown model '" + std::string(id_or_alias) +
                   "'; known models: " + KnownTransformerIds());
}

}  // namespace joulepipe::physics
