#include "client/cli_args.h"

#include "client/cli_local.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove::cli {
namespace {

using ::testing::HasSubstr;

TEST(CliArgs, PredictWithEveryOption) {
  auto a = ParseCliArgs({"predict", "--model", "m.json", "-i", "x.csv", "--output=o.csv", "--kind",
                         "leaf", "--iteration-begin", "2", "--iteration-end=7", "-t", "3",
                         "--chunk-rows", "100", "--strategy", "cpu", "--no-gpu", "--no-progress",
                         "-v"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, Command::kPredict);
  EXPECT_EQ(a->model, "m.json");
  EXPECT_EQ(a->input, "x.csv");
  EXPECT_EQ(a->output, "o.csv");
  EXPECT_EQ(a->kind, OutputKind::kLeaf);
  EXPECT_EQ(a->iteration_begin, 2);
  EXPECT_EQ(a->iteration_end, 7);
  EXPECT_EQ(a->threads, 3);
  EXPECT_EQ(a->chunk_rows, 100);
  EXPECT_EQ(a->strategy, "cpu");
  EXPECT_FALSE(a->use_gpu);
  EXPECT_FALSE(a->progress);
  EXPECT_TRUE(a->verbose);
  EXPECT_TRUE(a->server.empty());
}

TEST(CliArgs, Defaults) {
  auto a = ParseCliArgs({"explain", "--model", "m.txt", "--input", "-", "--interactions"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, Command::kExplain);
  EXPECT_EQ(a->output, "-");
  EXPECT_TRUE(a->interactions);
  EXPECT_EQ(a->iteration_end, 0);
  EXPECT_EQ(a->threads, 0);
  EXPECT_TRUE(a->use_gpu);
  auto p = ParseCliArgs({"predict", "--model", "m", "--input", "x"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, OutputKind::kPrediction);
}

TEST(CliArgs, RemoteOptions) {
  auto a = ParseCliArgs({"predict", "--server", "localhost:8500", "--model", "adult", "--input",
                         "x.csv", "--model-version", "3", "--timeout", "2.5"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->server, "localhost:8500");
  EXPECT_EQ(a->model_version, "3");
  EXPECT_DOUBLE_EQ(a->timeout_seconds, 2.5);
  EXPECT_FALSE(ParseCliArgs({"predict", "--model", "m", "--input", "x", "--timeout", "1"}).ok());
  EXPECT_FALSE(ParseCliArgs({"inspect", "--server", "h:1", "--model", "m", "--timeout", "-1"}).ok());
  // Rows go raw unless a bench asks for the older repeated form.
  a = ParseCliArgs({"bench", "--server", "h:1", "--model", "m"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->repeated_values);
  a = ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--repeated-values"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->repeated_values);
  EXPECT_FALSE(ParseCliArgs({"predict", "--server", "h:1", "--model", "m", "--input", "x",
                             "--repeated-values"}).ok());
  // Several bench processes: 1..256.
  EXPECT_EQ(a->processes, 1);
  a = ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--processes", "4"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->processes, 4);
  EXPECT_FALSE(ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--processes", "0"}).ok());
  // Closed-loop client threads: 0 (default) is a quarter of the hardware threads; 1..1024 given.
  EXPECT_EQ(a->client_threads, 0);
  a = ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--client-threads", "4"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->client_threads, 4);
  EXPECT_FALSE(
      ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--client-threads", "0"}).ok());
  EXPECT_FALSE(
      ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--client-threads", "1025"}).ok());
  EXPECT_FALSE(ParseCliArgs({"predict", "--model", "m", "--client-threads", "4"}).ok());
  EXPECT_FALSE(
      ParseCliArgs({"bench", "--server", "h:1", "--model", "m", "--processes", "257"}).ok());
}

TEST(CliArgs, Token) {
  for (const char* command : {"predict", "explain", "inspect", "bench"}) {
    std::vector<std::string> args = {command, "--server", "h:1", "--model", "m", "--token",
                                     "abc-0123456789abcdef"};
    if (std::string(command) != "inspect") args.insert(args.end(), {"--input", "x.csv"});
    auto a = ParseCliArgs(args);
    ASSERT_TRUE(a.ok()) << command << ": " << a.status();
    EXPECT_EQ(a->token, "abc-0123456789abcdef");
    EXPECT_THAT(HelpText(command), HasSubstr("--token TOKEN"));
    EXPECT_THAT(HelpText(command), HasSubstr("GROVE_TOKEN"));
  }
  auto local = ParseCliArgs({"predict", "--model", "m", "--input", "x", "--token", "t"});
  ASSERT_FALSE(local.ok());
  EXPECT_THAT(local.status().message(), HasSubstr("--token needs --server"));
  auto empty = ParseCliArgs({"predict", "--server", "h:1", "--model", "m", "--input", "x",
                             "--token="});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("--token needs a value"));
}

TEST(CliArgs, HelpForms) {
  for (auto args : {std::vector<std::string>{}, {"--help"}, {"-h"}, {"help"}}) {
    auto a = ParseCliArgs(args);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->command, Command::kHelp);
    EXPECT_EQ(a->help_topic, "");
  }
  auto a = ParseCliArgs({"inspect", "--help"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, Command::kHelp);
  EXPECT_EQ(a->help_topic, "inspect");
  EXPECT_THAT(HelpText("inspect"), HasSubstr("grove inspect"));
  EXPECT_FALSE(ParseCliArgs({"help", "nonsense"}).ok());
}

TEST(CliArgs, InterventionalExplain) {
  auto a = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv", "--background",
                         "bg.csv", "--output-space", "probability_linearized"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->background, "bg.csv");
  EXPECT_EQ(a->output_space, OutputSpace::kProbabilityLinearized);
  EXPECT_EQ(a->method, ExplainMethod::kInterventional);  // implied by --background
  EXPECT_TRUE(ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv", "--background",
                            "bg.csv", "--interactions"})
                  .ok());
  auto d = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv"});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->background.empty());
  EXPECT_EQ(d->method, ExplainMethod::kPathDependent);
  EXPECT_EQ(d->output_space, OutputSpace::kMargin);
  // Remote: the server's background.
  auto r = ParseCliArgs({"explain", "--server", "h:1", "--model", "m", "--input", "x.csv",
                         "--method", "interventional", "--output-space", "probability"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, ExplainMethod::kInterventional);
  EXPECT_EQ(r->output_space, OutputSpace::kProbability);
}

TEST(CliArgs, Attribution) {
  auto d = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->attribution, Attribution::kShapley);
  auto b = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv", "--background",
                         "bg.csv", "--attribution", "banzhaf"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->attribution, Attribution::kBanzhaf);
  auto bad = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv", "--attribution",
                           "owen"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--attribution: unknown attribution 'owen'"));
  EXPECT_FALSE(ParseCliArgs({"predict", "--model", "m.json", "--input", "x.csv", "--attribution",
                             "banzhaf"})
                   .ok());
  EXPECT_THAT(HelpText("explain"), HasSubstr("--attribution NAME"));
  for (Attribution a : kAttributions) {  // the names come from the core's table
    EXPECT_THAT(HelpText("explain"), HasSubstr(AttributionName(a)));
  }
}

TEST(CliArgs, ResidualsAndRemoteInterventionalInteractions) {
  auto a = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv", "--residuals"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->residuals);
  EXPECT_FALSE(ParseCliArgs({"explain", "--model", "m.json", "--input", "x.csv"})->residuals);
  EXPECT_FALSE(ParseCliArgs({"predict", "--model", "m.json", "--input", "x.csv", "--residuals"})
                   .ok());
  EXPECT_THAT(HelpText("explain"), HasSubstr("--residuals"));
  // groved serves interventional interaction values over the model's background.
  EXPECT_TRUE(ParseCliArgs({"explain", "--server", "h:1", "--model", "m", "--input", "x.csv",
                            "--method", "interventional", "--interactions", "--residuals"})
                  .ok());
}

TEST(CliArgs, TopK) {
  auto a = ParseCliArgs({"explain", "--model", "m.json", "--input", "x.npy", "--top-k", "3"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->top_k, 3);
  EXPECT_EQ(a->input, "x.npy");
  EXPECT_THAT(ParseCliArgs({"explain", "--model", "m", "--input", "x", "--top-k", "0"})
                  .status().message(),
              HasSubstr("--top-k must be >= 1"));
  EXPECT_THAT(ParseCliArgs({"predict", "--model", "m", "--input", "x", "--top-k", "2"})
                  .status().message(),
              HasSubstr("unknown option '--top-k' for 'grove predict'"));
  EXPECT_THAT(HelpText("explain"), HasSubstr("--top-k K"));
  EXPECT_THAT(ParseCliArgs({"explain", "--model", "m", "--input", "x", "--top-k", "2",
                            "--residuals"})
                  .status().message(),
              HasSubstr("--residuals checks every SHAP value"));
}

TEST(CliArgs, Errors) {
  struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"predict", "--model", "m", "--input", "x", "--kind", "raw"}, "not one of"},
      {{"predict", "--model", "m", "--input", "x", "--threads", "-1"}, "must be >= 0"},
      {{"predict", "--model", "m", "--input", "x", "--chunk-rows", "0"}, "must be >= 1"},
      {{"predict", "--model", "m", "--input", "x", "--threads", "1x"}, "not an integer"},
      {{"predict", "--model", "m", "--input", "x", "--no-gpu=yes"}, "takes no value"},
      {{"inspect", "--model", "m", "--input", "x"}, "unknown option '--input'"},
      {{"predict", "--model", "m", "--input", "x", "--json"}, "unknown option '--json'"},
      {{"predict", "--modle", "m"}, "unknown option '--modle'"},
      {{"version", "extra"}, "no arguments"},
      {{"explain", "--model", "m", "--input", "x", "--output-space", "probability"},
       "--output-space needs --background FILE or --method interventional"},
      {{"explain", "--model", "m", "--input", "x", "--method", "interventional"},
       "--method interventional needs --background FILE (or --server"},
      {{"explain", "--model", "m", "--input", "x", "--method", "exact"},
       "unknown explanation method 'exact'"},
      {{"explain", "--model", "m", "--input", "x", "--background", "b", "--method",
        "path_dependent"},
       "--method path_dependent takes none"},
      {{"explain", "--server", "h:1", "--model", "m", "--input", "x", "--background", "b"},
       "with --server, --method interventional"},
      {{"explain", "--server", "h:1", "--model", "m", "--input", "x", "--method",
        "path_dependent", "--output-space", "probability"},
       "--output-space needs"},
      {{"explain", "--model", "m", "--input", "x", "--background", "b", "--output-space", "odds"},
       "unknown output space 'odds'"},
      {{"predict", "--model", "m", "--input", "x", "--background", "b"},
       "unknown option '--background'"},
  };
  for (const auto& c : cases) {
    auto a = ParseCliArgs(c.args);
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr(c.message));
  }
}

TEST(CliLocal, AutoChunkRowsIsBounded) {
  EXPECT_EQ(AutoChunkRows(8, 1), 262144);
  EXPECT_EQ(AutoChunkRows(0, 0), 262144);
  EXPECT_EQ(AutoChunkRows(128, 129 * 129), (int64_t{1} << 23) / (129 * 129));
  EXPECT_EQ(AutoChunkRows(1, int64_t{1} << 30), 1);
}

// Numbers as JSON numbers, yes/no answers as JSON booleans (text keeps "yes" / "no"), strings quoted.
TEST(CliLocal, RenderStats) {
  std::vector<Stat> stats = {{"trees", "10", StatKind::kNumber},
                             {"objective", "binary \"x\"", StatKind::kText},
                             {"dart", "yes", StatKind::kBool},
                             {"linear", "no", StatKind::kBool}};
  EXPECT_EQ(RenderStats(stats, true),
            "{\"trees\": 10, \"objective\": \"binary \\\"x\\\"\", \"dart\": true, \"linear\": false}\n");
  EXPECT_EQ(RenderStats(stats, false),
            "trees      10\nobjective  binary \"x\"\ndart       yes\nlinear     no\n");
}

}  // namespace
}  // namespace grove::cli
