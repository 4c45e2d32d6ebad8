import { defineConfig } from "vitest/config"

/**
 * Suites that start real processes again and again, or time CPU-bound work against the machine's
 * two cores: `npm run test:slow` (and CI) runs them one file at a time, each in a vitest process of its
 * own (scripts/test-slow.ts), so none slows another and none runs in a heap the files before it grew.
 */
export const slow = [
  "test/platform/Crash.test.ts",
  "test/AgentCrash.test.ts",
  "test/SubAgentCrash.test.ts",
  "test/platform/Shutdown.test.ts",
  "test/main.test.ts",
  "test/WorkerPool.test.ts",
  "test/WorkerTools.test.ts",
  "test/SqliteLocked.test.ts",
  "test/McpStdioProcess.test.ts",
  "test/demo/worker.test.ts",
  "test/Package.test.ts",
  "test/AgentApprovalProcess.test.ts",
  "test/platform/ClusterFailover.test.ts",
  "test/platform/ClusterOutage.test.ts",
  "test/platform/Cluster.test.ts",
  "test/platform/ClusterWake.test.ts",
  "test/platform/HostileCluster.test.ts",
  "test/platform/ClusterExecAgent.test.ts",
  "test/platform/OperatorApiCluster.test.ts",
  "test/platform/Tenants.test.ts",
  "test/platform/JobQueue.test.ts",
  "test/platform/ClusterJobQueue.test.ts",
  "test/McpConformance.test.ts",
  "test/McpHttpAttacks.test.ts",
  "test/PostgresPrivateFolder.test.ts",
  "test/McpHostileServer.test.ts",
  "test/TelemetryProcesses.test.ts",
  "test/cliOperateProcess.test.ts",
  "test/console/Console.test.ts",
  "test/ServePostgres.test.ts",
  "test/internal/sql/postgres.test.ts",
  "test/PlatformConfigProcess.test.ts",
  "test/McpTasksProcess.test.ts",
  "test/McpOAuthProcess.test.ts",
  "test/McpTasksCluster.test.ts",
  "test/platform/ClusterHealth.test.ts",
  "test/platform/ClusterDrain.test.ts",
  "test/platform/ClusterPrune.test.ts",
  "test/platform/ClusterStartup.test.ts",
  "test/platform/ClusterSpread.test.ts",
  "test/AgentSessionsPostgres.test.ts",
  "test/platform/ClusterBusy.test.ts",
  "test/internal/sql/pipelined.test.ts"
]

export default defineConfig({
  test: {
    // Two files at a time on two cores (vitest's default is one less than the cores): most of a
    // fast file's time is loading its modules. The slow project keeps one fork.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: "fast",
          include: ["test/**/*.test.ts"],
          exclude: ["test/bench/**", "node_modules/**", ...slow]
        }
      },
      { test: { name: "slow", include: slow, poolOptions: { forks: { singleFork: true } } } }
    ]
  }
})
