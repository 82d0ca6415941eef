// load_paged_model: config.json's model_type picks the family whose CPU model the runner wraps.
// The file is read once (it may be a pipe, as in the server's loading test).
#include "deepinfer/model/config_field_reader.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/sequence_state.h"
#include "deepinfer/model/deepseek_v4/state_layout.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/dspark.h"
#include "deepinfer/model/deepseek_v41/sequence_state.h"
#include "deepinfer/model/deepseek_v41/state_layout.h"
#include "deepinfer/model/eplb/placement_json.h"
#include "deepinfer/model/model_family.h"
#include "deepinfer/runtime/cpu/paged_model.h"

namespace deepinfer::runtime::cpu {
namespace {

std::function<void(const v4::LoadProgress&)> progress_of(const RunnerOptions& o) {
  return [&o](const v4::LoadProgress& p) {
    if (o.on_load_progress)
      o.on_load_progress(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
  };
}

// The EPLB plan of --eplb-plan, checked against the model and the group; null without one.
StatusOr<std::shared_ptr<const ExpertPlacement>> read_plan(const RunnerOptions& o, int layers,
                                                           int experts) {
  if (o.eplb_plan.empty()) return std::shared_ptr<const ExpertPlacement>();
  StatusOr<ExpertPlacement> plan = read_placement_file(o.eplb_plan);
  if (!plan.ok()) return invalid_argument("--eplb-plan: " + plan.status().message());
  const int size = o.expert_group ? o.expert_group->size() : 1;
  if (Status fits = check_placement_fits(*plan, layers, experts, size); !fits.ok())
    return invalid_argument("--eplb-plan " + o.eplb_plan + ": " + fits.message() + " (" +
                            o.model_dir + ")");
  return std::make_shared<const ExpertPlacement>(std::move(plan).value());
}

StatusOr<std::unique_ptr<PagedModel>> load_v4(const RunnerOptions& o, const std::string& text,
                                              const std::string& path, int page_tokens) {
  ASSIGN_OR_RETURN(v4::Config config, v4::parse_config_json(text, path));
  const v4::Numerics numerics =
      o.numerics == Numerics::kPlain ? v4::Numerics::kPlain : v4::Numerics::kOfficial;
  ASSIGN_OR_RETURN(std::shared_ptr<const ExpertPlacement> plan,
                   read_plan(o, config.num_layers, config.n_routed_experts));
  ASSIGN_OR_RETURN(std::unique_ptr<v4::CpuModel> model,
                   v4::CpuModel::load(o.model_dir, std::move(config),
                                      {numerics, std::nullopt, o.expert_group, std::move(plan),
                                       o.two_batch_overlap},
                                      progress_of(o)));
  ModelInfo info;
  info.model_type = "deepseek_v4";
  info.vocab_size = model->config().vocab_size;
  info.eos_token_id = static_cast<int32_t>(model->config().eos_token_id);
  info.numerics = numerics == v4::Numerics::kPlain ? "plain" : "official";
  info.weight_bytes = model->weight_bytes();
  return std::unique_ptr<PagedModel>(
      new PagedModelOf<v4::CpuModel, v4::StateLayout, v4::SequenceState>(
          std::move(model), page_tokens, std::move(info)));
}

StatusOr<std::unique_ptr<PagedModel>> load_v41(const RunnerOptions& o, const std::string& text,
                                               const std::string& path, int page_tokens) {
  if (o.numerics == Numerics::kOfficial)
    return unimplemented("--numerics official: deepseek_v41 (" + o.model_dir +
                         ") has only plain numerics on the CPU (use --numerics plain or auto)");
  ASSIGN_OR_RETURN(v41::Config config, v41::parse_config_json(text, path));
  ASSIGN_OR_RETURN(std::shared_ptr<const ExpertPlacement> plan,
                   read_plan(o, config.num_layers, config.n_routed_experts));
  ASSIGN_OR_RETURN(std::unique_ptr<v41::CpuModel> model,
                   v41::CpuModel::load(o.model_dir, std::move(config),
                                       v41::ModelOptions{v4::Numerics::kPlain, o.expert_group,
                                                         std::move(plan), o.two_batch_overlap},
                                       progress_of(o)));
  ModelInfo info;
  info.model_type = "deepseek_v41";
  info.vocab_size = model->config().vocab_size;
  info.eos_token_id = static_cast<int32_t>(model->config().eos_token_id);
  info.numerics = "plain";
  info.weight_bytes = model->weight_bytes();
  // The DSpark drafter reads the model's weights in place (the model object does not move).
  std::unique_ptr<v41::DsparkDrafter> drafter;
  std::string why_not = "the runner was created without drafting (RunnerOptions::drafting)";
  if (o.drafting) {
    StatusOr<std::unique_ptr<v41::DsparkDrafter>> d = v41::DsparkDrafter::create(*model);
    if (d.ok()) {
      drafter = std::move(d).value();
    } else {
      why_not = d.status().message();
    }
  }
  auto paged = std::make_unique<PagedModelOf<v41::CpuModel, v41::StateLayout, v41::SequenceState>>(
      std::move(model), page_tokens, std::move(info));
  paged->set_dspark(std::move(drafter), std::move(why_not));
  return std::unique_ptr<PagedModel>(std::move(paged));
}

}  // namespace

StatusOr<std::unique_ptr<PagedModel>> load_paged_model(const RunnerOptions& options,
                                                       int page_tokens) {
  std::string path;
  ASSIGN_OR_RETURN(std::string text, model_config::read_config_file(options.model_dir, &path));
  ASSIGN_OR_RETURN(ModelFamily family, model_family_from_config_json(text, path));
  switch (family) {
    case ModelFamily::kDeepseekV4:
      return load_v4(options, text, path, page_tokens);
    case ModelFamily::kDeepseekV41:
      return load_v41(options, text, path, page_tokens);
  }
  return internal_error("unknown model family");
}

}  // namespace deepinfer::runtime::cpu
