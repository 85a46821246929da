/**
 * Stage 4, persisting: the new turn (the user message, or on /v1 whatever the client added since
 * the last answer) and the reply are appended to the caller's session. A reply cut short (client
 * gone, upstream failed) is stored too, marked incomplete.
 */
import { isoTime } from '../domain/iso-time.js';
import type { ToolCall } from '../domain/types.js';
import type { SessionMessage } from '../store/types.js';
import type { ChatDependencies, ChatJob } from './chat-job.js';

/** The answer as a session stores it. */
export interface RecordedAnswer {
  text: string;
  toolCalls: readonly ToolCall[];
}

/** Appends the new turn and the reply to the job's session; does nothing without a session. */
export async function persistTurn(
  job: ChatJob,
  deps: Pick<ChatDependencies, 'sessions'>,
  newTurn: SessionMessage[],
  answer: RecordedAnswer,
  options: { incomplete: boolean },
): Promise<void> {
  const sessionId = job.request.session_id;
  if (sessionId === undefined) return;
  const reply: SessionMessage = { role: 'assistant', content: answer.text, timestamp: isoTime() };
  if (answer.toolCalls.length > 0) {
    reply.tool_calls = answer.toolCalls.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }));
  }
  if (options.incomplete) reply.incomplete = true;
  await deps.sessions.append(job.caller.id, sessionId, [...newTurn, reply]);
}
