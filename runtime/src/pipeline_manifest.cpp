//===- pipeline_manifest.cpp - The manifest's pipeline, read ----------------===//
//
// PipelineRunner::Impl::parse and its parts: the manifest's stages,
// fragments (their arguments' and results' arena slots and message
// offsets), this rank's chunks, the schedule's instructions and the
// tensors the runner moves (tokens, labels, loss, gradient accumulators,
// tied parameters). Inconsistencies throw ParseError (`bad`), which
// PipelineRunner::create reports as a Status.
//
//===----------------------------------------------------------------------===//
#include "pipeline_impl.h"

namespace merak::rt {

void PipelineRunner::Impl::parse(const Manifest &m) {
  const schema::Pipeline &pl = *m.pipeline;
  stages = pl.stages;
  microbatches = pl.microbatches;
  chunks = pl.virtualStages;
  if (stages < 1 || microbatches < 1 || chunks < 1 || stages % chunks != 0)
    bad("bad stages, virtual_stages or microbatches");
  if (2 * stages * microbatches > kTiedTagBase)
    bad("too many stages x micro-batches (" + std::to_string(stages * microbatches) + ", at most " +
        std::to_string(kTiedTagBase / 2) + ")");
  ranks = stages / chunks;
  dp = m.meshDp;
  rank = comm ? comm->coord().pp : 0;
  if (rank >= ranks)
    bad("this rank's stage is outside the pipeline");
  mine.resize(chunks);
  for (int64_t c = 0; c < chunks; ++c)
    mine[c].stage = c * ranks + rank;
  parseFragments(pl);
  parseChunks(pl);
  parseProgram(pl);
  parseTensors(m, pl);
}

void PipelineRunner::Impl::parseFragments(const schema::Pipeline &pl) {
  for (const schema::Fragment &f : pl.fragments) {
    Fragment fr;
    fr.stage = f.stage;
    fr.kind = f.kind;
    if (fr.stage >= stages)
      bad("a fragment's stage is outside the pipeline");
    if (fr.stage % ranks == rank) {
      if (fr.kind == "update") {
        if (fr.stage != rank || updateFragment >= 0)
          bad("rank " + std::to_string(rank) + "'s update must be one fragment of stage " +
              std::to_string(rank));
        updateFragment = fragments.size();
      } else if (!mine[fr.stage / ranks].frags.emplace(fr.kind, fragments.size()).second) {
        bad("two \"" + fr.kind + "\" fragments on stage " + std::to_string(fr.stage));
      }
    }
    auto slot = [](const schema::FragmentSlot &s, const std::string &kind) {
      Slot out;
      out.kind = kind;
      out.offset = s.offset.value_or(-1);
      out.bytes = s.bytes;
      out.msgOffset = s.msgOffset.value_or(0);
      return out;
    };
    for (const schema::FragmentArg &a : f.args) {
      fr.args.push_back(slot(a, a.source));
      fr.args.back().inputOffset = a.inputOffset.value_or(0);
    }
    for (const schema::FragmentResult &r : f.results) {
      fr.results.push_back(slot(r, r.dest));
      fr.results.back().outOffset = r.outOffset.value_or(0);
      fr.results.back().f64 = r.dtype == "F64";
    }
    // Only what the runner always hands over in its own buffer may lack an
    // arena slot (bindArgs, compute).
    const bool update = fr.kind == "update" || fr.kind == "prepare";
    for (const Slot &a : fr.args)
      if (a.offset < 0 &&
          (update || (a.kind != "tokens" && a.kind != "labels" && a.kind != "input" &&
                      a.kind != "label_count" && keptKind(a.kind) < 0)))
        bad("fragment \"" + f.name + "\"'s " + a.kind + " argument has no arena slot");
    for (const Slot &r : fr.results)
      if (r.offset < 0 && (update || keptKind(r.kind) < 0 || readsKind(fr, r.kind)))
        bad("fragment \"" + f.name + "\"'s " + r.kind + " result has no arena slot");
    fragments.push_back(std::move(fr));
  }
  if (updateFragment < 0)
    bad("stage " + std::to_string(rank) + " has no \"update\" fragment");
}

void PipelineRunner::Impl::parseChunks(const schema::Pipeline &pl) {
  for (Chunk &ch : mine) {
    for (const char *k : {"forward", "backward"})
      if (!ch.frags.count(k))
        bad("stage " + std::to_string(ch.stage) + " has no \"" + k + "\" fragment");
    if (ch.frags.count("backward_weight"))
      ch.finalKind = "backward_weight";
    const schema::StageInfo &info = pl.stageInfo.at(ch.stage);
    ch.actIn.bytes = info.actInBytes;
    ch.actOut.bytes = info.actOutBytes;
    ch.cotIn.bytes = info.cotInBytes;
    ch.cotOut.bytes = info.cotOutBytes;
    ch.kept[Stash].bytes = info.stashBytes;
    ch.kept[RStash].bytes = info.rstashBytes;
    ch.kept[WStash].bytes = info.wstashBytes;
    for (Kept *b :
         {&ch.actIn, &ch.actOut, &ch.cotIn, &ch.cotOut, &ch.kept[0], &ch.kept[1], &ch.kept[2]})
      b->of.assign(microbatches, nullptr);
    for (Kept *b : {&ch.actIn, &ch.actOut, &ch.cotIn, &ch.cotOut})
      b->message = true;
    ch.recvAct.resize(microbatches);
    ch.recvGrad.resize(microbatches);
  }
}

void PipelineRunner::Impl::parseProgram(const schema::Pipeline &pl) {
  for (const schema::Instr &i : pl.programs.at(rank)) {
    Instr in{i.op, i.mb, i.chunk.value_or(0)};
    if (in.mb >= microbatches || in.chunk < 0 || in.chunk >= chunks)
      bad("instruction micro-batch or chunk out of range");
    if (const char *kind = fragmentKindOf(in.op); kind && !mine[in.chunk].frags.count(kind))
      bad("instruction \"" + in.op + "\" needs a \"" + kind + "\" fragment, which stage " +
          std::to_string(mine[in.chunk].stage) + " lacks");
    program.push_back(std::move(in));
  }
  // Each compute instruction's fragment. A chunk's last `finalKind`
  // instruction runs the "_last" copy when there is one (merak-overlap:
  // it also all-reduces the finished gradients over dp).
  std::vector<bool> lastSeen(chunks, false);
  for (auto it = program.rbegin(); it != program.rend(); ++it) {
    const char *kind = fragmentKindOf(it->op);
    if (!kind)
      continue;
    Chunk &ch = mine[it->chunk];
    it->frag = ch.frags.at(kind);
    it->releases = kind == ch.finalKind;
    if (it->releases && !lastSeen[it->chunk]) {
      lastSeen[it->chunk] = true;
      if (auto last = ch.frags.find(std::string(kind) + "_last"); last != ch.frags.end())
        it->frag = last->second;
    }
  }
  for (const Instr &in : program)
    if (in.frag >= 0)
      for (const Slot &r : fragments[in.frag].results)
        if (r.kind == "loss")
          lossF64.push_back(r.f64), ++lossCount;
  losses.assign(8 * lossCount, 0);
}

void PipelineRunner::Impl::parseTensors(const Manifest &m, const schema::Pipeline &pl) {
  std::map<std::string, Region> params;
  for (const ManifestTensor &p : m.params)
    params[p.name] = {p.offset, p.bytes, p.dtype == DType::F64};
  auto param = [&](const std::string &name) {
    auto it = params.find(name);
    if (it == params.end())
      bad("no param '" + name + "'");
    return it->second;
  };
  for (int64_t s = stages - 1; s >= 0; --s)
    for (const std::string &n : pl.stageInfo.at(s).params) {
      param(n); // must exist
      firstUser[n] = static_cast<int>(s % ranks);
      if (s % ranks == rank)
        usedHere.insert(n);
    }
  // Accumulators are zeroed before every step: only this rank's, so that
  // the pages of other ranks' parameters are never touched.
  for (const std::string &a : pl.accumulators)
    if (usedHere.count(a))
      accumulators.push_back(param(a));
  for (const schema::SharedAccumulator &s : pl.shared) {
    Shared sh{param(s.name), {}};
    for (int64_t x : s.stages)
      sh.stages.push_back(static_cast<int>(x));
    shared.push_back(std::move(sh));
  }

  for (const ManifestTensor &in : m.inputs) {
    Region t{in.offset, 0, false};
    if (in.role == "tokens")
      tokens = t, haveTokens = true;
    else if (in.role == "labels")
      labels = t, haveLabels = true;
  }
  if (const ManifestTensor *out = m.output("loss"))
    loss = {out->offset, 0, out->dtype == DType::F64}, haveLoss = true;
}

} // namespace merak::rt
