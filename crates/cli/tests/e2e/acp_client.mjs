// Drives `whittle acp` with the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in scripts/npm-packages.txt) through
// the main path. Started by the Rust test e2e::acp::the_typescript_sdk_*,
// which scripts the model and passes, in the environment:
//   ACP_SDK      the SDK's ESM entry point (absolute path)
//   WHITTLE_BIN  the whittle binary        WORKSPACE  the workspace
//   EVERYTHING   server-everything's entry  NODE_BIN   node, for it
//   MARKER       a string in the long command, to find its process
// Exits 0 when every check held; prints what failed otherwise.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const acp = await import(pathToFileURL(process.env.ACP_SDK).href);
const { WHITTLE_BIN, WORKSPACE, EVERYTHING, NODE_BIN, MARKER } = process.env;

function check(ok, what, detail) {
  if (!ok) {
    console.error(`FAILED: ${what}`, detail === undefined ? "" : JSON.stringify(detail, null, 1));
    process.exit(1);
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitFor(what, ready) {
  const start = Date.now();
  while (!ready()) {
    check(Date.now() - start < 30000, `waited for ${what}`);
    await sleep(50);
  }
}

function processesWith(marker) {
  const found = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const line = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (line.includes(marker) && !line.includes("node")) found.push(line);
    } catch {}
  }
  return found;
}

/** Starts whittle acp and runs `op` with a connected client context. */
async function withAgent(answers, op) {
  const child = spawn(WHITTLE_BIN, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const seen = { updates: [], asked: [] };
  const app = acp
    .client({ name: "acp-node-e2e" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      seen.updates.push(params.update);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      seen.asked.push(params);
      const optionId = answers.shift() ?? "reject-once";
      return { outcome: { outcome: "selected", optionId } };
    });
  await app.connectWith(stream, (ctx) => op(ctx, seen));
  child.stdin.end();
  const code = await new Promise((r) => child.on("exit", (c) => r(c)));
  check(code === 0, "whittle acp exits cleanly when the client goes", code);
}

const kinds = (seen, type) => seen.updates.filter((u) => u.sessionUpdate === type);
let sessionId;

await withAgent(["allow-once", "allow-once", "reject-once"], async (ctx, seen) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
  check(init.protocolVersion === 1, "protocol v1", init);
  check(init.agentCapabilities.loadSession === true, "loadSession", init);
  const created = await ctx.request(acp.methods.agent.session.new, {
    cwd: WORKSPACE,
    mcpServers: [{ name: "everything", command: NODE_BIN, args: [EVERYTHING, "stdio"], env: [] }],
  });
  sessionId = created.sessionId;
  check(created.modes.currentModeId === "default", "default mode", created.modes);

  const first = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "tidy the notes" }],
  });
  check(first.stopReason === "end_turn", "end_turn", first);
  check(
    kinds(seen, "available_commands_update").some((u) => u.availableCommands.some((c) => c.name === "compact")),
    "slash commands offered",
  );
  const read = kinds(seen, "tool_call").find((t) => t.toolCallId === "r1");
  check(read?.kind === "read" && read.locations?.[0]?.path === join(WORKSPACE, "notes.txt"), "read with location", read);
  const edit = kinds(seen, "tool_call_update").find((t) => t.toolCallId === "e1");
  const diff = edit?.content?.find((c) => c.type === "diff");
  check(diff?.oldText === "hello world\n" && diff?.newText === "goodbye world\n", "the edit's diff", edit);
  const b1 = kinds(seen, "tool_call_update").find((t) => t.toolCallId === "b1");
  check(b1?.status === "completed" && JSON.stringify(b1.content).includes("made it"), "command output", b1);
  const b2 = kinds(seen, "tool_call_update").find((t) => t.toolCallId === "b2");
  check(b2?.status === "failed", "second command refused", b2);
  check(
    JSON.stringify(seen.asked.map((a) => a.toolCall.toolCallId)) === JSON.stringify(["e1", "b1", "b2"]),
    "asked about the edit and both commands",
    seen.asked,
  );
  const plan = kinds(seen, "plan").at(-1);
  check(plan?.entries?.length === 2 && plan.entries[1].status === "in_progress", "plan", plan);

  seen.updates.length = 0;
  const compacted = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "/compact keep the notes" }],
  });
  check(compacted.stopReason === "end_turn", "compact ends its turn", compacted);
  check(
    kinds(seen, "tool_call").some((t) => t.title.startsWith("Compacted:")),
    "compaction visible as a tool call",
    seen.updates,
  );

  const running = ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "wait a bit" }],
  });
  await waitFor("the command to start", () => existsSync(join(WORKSPACE, "started.txt")));
  await waitFor("the sleep to run", () => processesWith(MARKER).length > 0);
  await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await running;
  check(cancelled.stopReason === "cancelled", "cancelled", cancelled);
  await waitFor("the sleep to be killed", () => processesWith(MARKER).length === 0);
});

check(readFileSync(join(WORKSPACE, "notes.txt"), "utf8") === "goodbye world\n", "the edit landed");
check(!existsSync(join(WORKSPACE, "gone-once.txt")), "the allowed command ran");
check(existsSync(join(WORKSPACE, "gone-twice.txt")), "the refused command did not run");

await withAgent([], async (ctx, seen) => {
  await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION });
  await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: WORKSPACE, mcpServers: [] });
  check(
    kinds(seen, "user_message_chunk").some((u) => u.content.text?.includes("tidy the notes") || u.content.text?.includes("keep the notes") || u.content.text?.includes("wait a bit")),
    "history replayed",
    seen.updates,
  );
  await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "read-only" });
  check(kinds(seen, "current_mode_update").some((u) => u.currentModeId === "read-only"), "mode switched");
  const refused = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write something" }],
  });
  check(refused.stopReason === "end_turn", "end_turn after the refusal", refused);
  const w1 = kinds(seen, "tool_call_update").find((t) => t.toolCallId === "w1");
  check(w1?.status === "failed", "the write was refused", w1);
  check(seen.asked.length === 0, "read-only refuses without asking", seen.asked);
});
check(!existsSync(join(WORKSPACE, "blocked.txt")), "nothing written in read-only");
console.log("acp node e2e: ok");
