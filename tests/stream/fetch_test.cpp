// Fetching a real context over 127.0.0.1: every level lands exactly as a local decode would write it,
// with and without pipelining; text chunks are recomputed with the receiver's model; bad requests fail
// with errors that say what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/stream/stream_fixture.h"

namespace kvstream::testing {
namespace {

class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sender = Sender::Start(TestSenderOptions());
    ASSERT_TRUE(sender.ok()) << sender.status().ToString();
    sender_ = std::move(*sender);
    ASSERT_TRUE(sender_->Register("gpl", SpecOf(StoriesKv())).ok());
  }
  std::unique_ptr<Receiver> Connect(ReceiverOptions options = TestReceiverOptions()) {
    auto r = Receiver::Connect("127.0.0.1", sender_->port(), std::move(options));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }
  void CheckTransformScheme(QuantScheme scheme);
  std::unique_ptr<Sender> sender_;
};

// The index of `level` among a manifest's levels (-1 if not offered), and the bytes of all its chunks.
int LevelIndex(const FetchManifest& m, Level level) {
  for (size_t i = 0; i < m.levels.size(); ++i) {
    if (m.levels[i].level == level) return static_cast<int>(i);
  }
  return -1;
}
uint64_t LevelBytes(const FetchManifest& m, int index) {
  uint64_t total = 0;
  for (int c = 0; c < m.num_chunks; ++c) total += m.bytes[c][index];
  return total;
}

TEST_F(FetchTest, ManifestAdvertisesEveryChunkAndLevel) {
  auto receiver = Connect();
  auto reply = receiver->GetManifest("gpl");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  const RealKv& kv = StoriesKv();
  EXPECT_EQ(reply->layers, kv.cache.layers);
  EXPECT_EQ(reply->channels, kv.cache.kv_dim);
  EXPECT_EQ(reply->manifest.total_tokens, kContextTokens);
  EXPECT_EQ(reply->manifest.num_chunks, 5);
  EXPECT_EQ(reply->manifest.chunk_tokens.back(), kContextTokens - 4 * kChunkTokens);
  ASSERT_GE(reply->manifest.levels.size(), 4u);
  EXPECT_EQ(reply->manifest.levels.front().level, kLevelFp16);
  EXPECT_EQ(reply->manifest.levels.back().level, kLevelText);
  for (const auto& row : reply->manifest.bytes) {
    for (uint64_t b : row) EXPECT_GT(b, 0u);
  }
}

// Pipelined or not, on one decode thread or several (which share each chunk's segments when they have no
// chunk of their own to decode).
TEST_F(FetchTest, EveryKvLevelMatchesALocalDecodePipelinedOrNot) {
  const RealKv& kv = StoriesKv();
  auto manifest = Connect()->GetManifest("gpl");
  ASSERT_TRUE(manifest.ok());
  for (const LevelInfo& info : manifest->manifest.levels) {
    if (info.level == kLevelText) continue;
    const Destination expected = LocalDecode(kv, info.level);
    for (int inflight : {1, 3}) {
      ReceiverOptions options = TestReceiverOptions();
      options.max_inflight_chunks = inflight;
      options.decode_threads = inflight;
      auto receiver = Connect(options);
      Destination got(kv);
      FixedLevelPolicy policy(info.level);
      auto result = receiver->Fetch("gpl", got.keys, got.values, 10.0, policy);
      ASSERT_TRUE(result.ok()) << LevelName(info.level) << ": " << result.status().ToString();
      EXPECT_TRUE(result->complete);
      EXPECT_EQ(result->retries, 0);
      EXPECT_TRUE(SameBytes(got, expected)) << LevelName(info.level) << " inflight " << inflight;
      uint64_t advertised = 0;
      for (const auto& row : manifest->manifest.bytes) advertised += row[&info - manifest->manifest.levels.data()];
      EXPECT_EQ(result->bytes, advertised);
      ASSERT_EQ(result->chunks.size(), 5u);
      double last_byte_s = 0, decode_s = 0;
      for (const ChunkTelemetry& t : result->chunks) {
        EXPECT_EQ(t.level, info.level);
        EXPECT_LE(t.requested_at_s, t.received_at_s);
        EXPECT_LE(t.received_at_s, t.decoded_at_s);
        last_byte_s = std::max(last_byte_s, t.received_at_s);
        decode_s += t.decode_s;
      }
      EXPECT_EQ(result->last_byte_s, last_byte_s);
      EXPECT_LE(result->last_byte_s, result->kv_ready_s);
      EXPECT_EQ(result->decode_s, decode_s);
    }
  }
}

// A sender with a codec profile: its lossy chunks are smaller than with in-chunk tables, the manifest
// carries the profile's measured quality, a receiver holding the profile gets exactly a local decode with
// it, one without it is told which profile the chunk needs, and one with another profile is refused.
TEST_F(FetchTest, WithAProfileLevelsAreSmallerAdvertiseTheirQualityAndNeedTheProfile) {
  const RealKv& kv = StoriesKv();
  auto build = [&](int max_tables) {
    ProfileOptions po;
    po.model = "stories260K";
    po.max_tables = max_tables;
    ProfileBuilder builder(po);
    EXPECT_TRUE(builder.AddSample(SliceTokens(kv.cache.keys(), 0, 128), SliceTokens(kv.cache.values(), 0, 128)).ok());
    auto p = builder.Build();
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  };
  LevelQuality measured;
  measured.top1_agreement = 0.875;
  auto with_quality = build(64).WithQuality(3, measured);
  ASSERT_TRUE(with_quality.ok()) << with_quality.status().ToString();
  const auto profile = std::make_shared<const Profile>(std::move(*with_quality));

  SenderOptions so = TestSenderOptions();
  so.profile = profile;
  auto sender = Sender::Start(so);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  ASSERT_TRUE((*sender)->Register("gpl", SpecOf(kv)).ok());
  ReceiverOptions ro = TestReceiverOptions();
  ro.profile = profile;
  ro.decode_threads = 2;  // the predicted decoder's blocks of positions shared between the two
  auto receiver = Receiver::Connect("127.0.0.1", (*sender)->port(), ro);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  auto manifest = (*receiver)->GetManifest("gpl");
  auto own_tables = Connect()->GetManifest("gpl");
  ASSERT_TRUE(manifest.ok() && own_tables.ok());
  const int l3 = LevelIndex(manifest->manifest, 3);
  ASSERT_GE(l3, 0);
  EXPECT_EQ(manifest->manifest.levels[l3].quality, 0.875);
  EXPECT_LT(LevelBytes(manifest->manifest, l3), LevelBytes(own_tables->manifest, l3));

  Destination got(kv);
  FixedLevelPolicy policy(3);
  auto result = (*receiver)->Fetch("gpl", got.keys, got.values, 10.0, policy);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(SameBytes(got, LocalDecode(kv, 3, profile.get())));

  auto without = Receiver::Connect("127.0.0.1", (*sender)->port(), TestReceiverOptions());
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  auto refused = (*without)->Fetch("gpl", got.keys, got.values, 10.0, policy);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs profile"), std::string::npos) << refused.status().ToString();

  ReceiverOptions other = TestReceiverOptions();
  other.profile = std::make_shared<const Profile>(build(8));
  auto mismatched = Receiver::Connect("127.0.0.1", (*sender)->port(), other);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument) << mismatched.status().ToString();
}

// A sender of the transform or predicted scheme: smaller chunks than channel-uniform with the same
// profile, the scheme's own measured quality in the manifest, and exactly a local decode at the receiver.
TEST_F(FetchTest, TheTransformSchemesServeSmallerChunksThatDecodeLikeALocalDecode) {
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    SCOPED_TRACE(SchemeName(scheme));
    CheckTransformScheme(scheme);
  }
}

void FetchTest::CheckTransformScheme(QuantScheme scheme) {
  const RealKv& kv = StoriesKv();
  ProfileOptions po;
  po.model = "stories260K";
  po.transform = true;
  po.predict = scheme == QuantScheme::kPredicted;
  po.rope = kv.model->config().rope();
  ProfileBuilder builder(po);
  ASSERT_TRUE(builder.AddSample(SliceTokens(kv.cache.keys(), 0, 128), SliceTokens(kv.cache.values(), 0, 128)).ok());
  auto built = builder.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  LevelQuality measured;
  measured.top1_agreement = 0.75;
  auto with_quality = built->WithQuality(3, measured, scheme);
  ASSERT_TRUE(with_quality.ok()) << with_quality.status().ToString();
  // Measured with the fine rows the sender below codes: 10 % of the context's tokens at level 2.
  auto with_fine_rows = with_quality->WithMeasuredFineRows({0.1, 2});
  ASSERT_TRUE(with_fine_rows.ok()) << with_fine_rows.status().ToString();
  const auto profile = std::make_shared<const Profile>(std::move(*with_fine_rows));

  SenderOptions so = TestSenderOptions();
  so.scheme = scheme;
  so.fine_fraction = 0.1;  // of the context's tokens, at level 2 inside level 3
  auto no_profile = Sender::Start(so);
  ASSERT_FALSE(no_profile.ok());
  EXPECT_EQ(no_profile.status().code(), StatusCode::kInvalidArgument) << no_profile.status().ToString();
  so.profile = profile;
  auto sender = Sender::Start(so);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  ASSERT_TRUE((*sender)->Register("gpl", SpecOf(kv)).ok());
  SenderOptions plain_options = TestSenderOptions();
  plain_options.profile = profile;
  auto plain = Sender::Start(plain_options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE((*plain)->Register("gpl", SpecOf(kv)).ok());
  // Same scheme without fine rows: the profile's qualities are not this sender's, so it advertises none.
  SenderOptions other_options = so;
  other_options.fine_fraction = 0.0;
  auto other = Sender::Start(other_options);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)->Register("gpl", SpecOf(kv)).ok());

  ReceiverOptions ro = TestReceiverOptions();
  ro.profile = profile;
  ro.decode_threads = 2;  // the predicted decoder's blocks of positions shared between the two
  auto receiver = Receiver::Connect("127.0.0.1", (*sender)->port(), ro);
  auto plain_receiver = Receiver::Connect("127.0.0.1", (*plain)->port(), ro);
  ASSERT_TRUE(receiver.ok() && plain_receiver.ok());
  auto manifest = (*receiver)->GetManifest("gpl");
  auto plain_manifest = (*plain_receiver)->GetManifest("gpl");
  ASSERT_TRUE(manifest.ok() && plain_manifest.ok());
  const int l3 = LevelIndex(manifest->manifest, 3);
  ASSERT_GE(l3, 0);
  EXPECT_EQ(manifest->manifest.levels[l3].quality, 0.75);
  EXPECT_TRUE(std::isnan(plain_manifest->manifest.levels[l3].quality)) << "channel-uniform was not measured";
  EXPECT_LT(LevelBytes(manifest->manifest, l3), LevelBytes(plain_manifest->manifest, l3));
  auto other_receiver = Receiver::Connect("127.0.0.1", (*other)->port(), ro);
  ASSERT_TRUE(other_receiver.ok()) << other_receiver.status().ToString();
  auto other_manifest = (*other_receiver)->GetManifest("gpl");
  ASSERT_TRUE(other_manifest.ok()) << other_manifest.status().ToString();
  EXPECT_TRUE(std::isnan(other_manifest->manifest.levels[l3].quality)) << "measured with other fine rows";

  Destination got(kv);
  FixedLevelPolicy policy(3);
  auto result = (*receiver)->Fetch("gpl", got.keys, got.values, 10.0, policy);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const std::vector<float> importance = kv.cache.Importance();
  const float fine = FineRowsThreshold(importance.data(), static_cast<int64_t>(importance.size()), so.fine_fraction);
  EXPECT_TRUE(SameBytes(got, LocalDecode(kv, 3, profile.get(), scheme, fine)));
  EXPECT_FALSE(SameBytes(got, LocalDecode(kv, 3, profile.get(), scheme))) << "the sender coded no fine rows";
}

TEST_F(FetchTest, TextChunksAreRecomputedWithTheReceiversModel) {
  const RealKv& kv = StoriesKv();
  ReceiverOptions options = TestReceiverOptions();
  options.text_recomputer = MakeTextRecomputer(*kv.model);
  auto receiver = Connect(options);
  ASSERT_TRUE(receiver);
  Destination got(kv);
  // Alternate text with fp16 so recompute runs on top of KV that arrived over the wire.
  class Alternate : public LevelPolicy {
   public:
    std::string name() const override { return "alternate"; }
    void Begin(const FetchManifest&, double) override {}
    Level Choose(int chunk, double) override { return chunk % 2 == 0 ? kLevelText : kLevelFp16; }
    void Observe(const ChunkTelemetry&) override {}
    void SetLinkPrior(const LinkPrior& p) override { prior = p; }
    LinkPrior prior;
  } policy;
  auto result = receiver->Fetch("gpl", got.keys, got.values, 10.0, policy);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // The control connection's TCP_INFO reached the policy before the first chunk.
  EXPECT_GT(policy.prior.rtt_s, 0);
  EXPECT_EQ(policy.prior.rtt_s, result->link_prior.rtt_s);
  const Destination fp16 = LocalDecode(kv, kLevelFp16);
  double worst = 0;
  for (size_t i = 0; i < got.k.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got.k[i] - kv.cache.k[i / (kContextTokens * kv.cache.kv_dim) *
                                                                                     (kv.cache.capacity * kv.cache.kv_dim) +
                                                                                 i % (kContextTokens * kv.cache.kv_dim)])));
  }
  // Recomputed rows follow fp16-rounded prefixes, so they differ from the original by about fp16 rounding.
  EXPECT_LT(worst, 0.05) << "recomputed keys drift from the original KV";
  // fp16 chunks are exactly the local decode.
  for (int c = 1; c < 5; c += 2) {
    for (int64_t l = 0; l < kv.cache.layers; ++l) {
      const size_t at = (l * kContextTokens + c * kChunkTokens) * kv.cache.kv_dim;
      EXPECT_EQ(std::memcmp(&got.k[at], &fp16.k[at], kChunkTokens * kv.cache.kv_dim * sizeof(float)), 0);
    }
  }
}

TEST_F(FetchTest, TextWithoutARecomputerFailsSayingSo) {
  auto receiver = Connect();
  const RealKv& kv = StoriesKv();
  Destination got(kv);
  FixedLevelPolicy policy(kLevelText);
  auto result = receiver->Fetch("gpl", got.keys, got.values, 10.0, policy);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("needs a TextRecomputer"), std::string::npos) << result.status().ToString();
}

TEST_F(FetchTest, UnknownContextLevelOrShapeIsRefused) {
  auto receiver = Connect();
  const RealKv& kv = StoriesKv();
  Destination got(kv);
  FixedLevelPolicy fp16(kLevelFp16);
  auto missing = receiver->Fetch("nope", got.keys, got.values, 10.0, fp16);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  FixedLevelPolicy bogus(kMaxLossyLevel);
  auto level = receiver->Fetch("gpl", got.keys, got.values, 10.0, bogus);
  EXPECT_EQ(level.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(level.status().message().find("does not offer"), std::string::npos) << level.status().ToString();
  Destination small(kv.cache.layers, kContextTokens - 1, kv.cache.kv_dim);
  auto shape = receiver->Fetch("gpl", small.keys, small.values, 10.0, fp16);
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument) << shape.status().ToString();
  // The connection still works after refusals.
  auto ok = receiver->Fetch("gpl", got.keys, got.values, 10.0, fp16);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(FetchTest, ModelMismatchIsRefusedAtConnect) {
  ReceiverOptions options = TestReceiverOptions();
  options.control.model_hash = 12345;
  SenderOptions sender_options = TestSenderOptions();
  sender_options.control.model_hash = ModelHash(StoriesKv().model->config());
  auto sender = Sender::Start(sender_options);
  ASSERT_TRUE(sender.ok());
  auto receiver = Receiver::Connect("127.0.0.1", (*sender)->port(), options);
  ASSERT_FALSE(receiver.ok());
  EXPECT_NE(receiver.status().message().find("model hash"), std::string::npos) << receiver.status().ToString();
}

}  // namespace
}  // namespace kvstream::testing
