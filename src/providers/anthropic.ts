/**
 * Anthropic's Messages API, streamed: message_start, content_block_* (text_delta, thinking_delta),
 * message_delta (stop reason, output tokens), message_stop, and `error` events sent mid-stream.
 * Deep thinking turns on extended thinking with the model's token budget.
 */
import type { ModelConfig } from '../config/index.js';
import type { FinishReason } from '../domain/types.js';
import { type Dialect, type EventSourceMessage, readSse } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, truncatedStream, UpstreamError } from '../upstream/upstream-error.js';
import { numberField, objectField, objectOf, readFrame, stringField, WRONG } from './frame-check.js';
import { addAnthropicOptions, anthropicMessages } from './anthropic-messages.js';
import { conversation, systemText } from './prompt.js';
import type { ChatProvider, ProviderEvent, ProviderRequest, ProviderStream } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** The Messages API version this dialect speaks. */
const ANTHROPIC_VERSION = '2023-06-01';
/** Anthropic requires max_tokens; this is the answer budget when the caller gives none. */
const DEFAULT_MAX_TOKENS = 4096;

/** What one Messages stream event says, read with every field checked; undefined when it is malformed. */
interface StreamFrame {
  type: string | undefined;
  deltaType: string | undefined;
  text: string | undefined;
  thinking: string | undefined;
  stopReason: string | undefined;
  hasStopReason: boolean;
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  errorType: string | undefined;
  /** The content block an event is about (content_block_start/delta/stop). */
  index: number | undefined;
  blockType: string | undefined;
  blockId: string | undefined;
  blockName: string | undefined;
  partialJson: string | undefined;
}

function readStreamFrame(json: unknown): StreamFrame | undefined {
  const frame = objectOf(json);
  if (!frame) return undefined;
  const message = objectField(frame, 'message');
  const delta = objectField(frame, 'delta');
  const error = objectField(frame, 'error');
  const block = objectField(frame, 'content_block');
  if (message === WRONG || delta === WRONG || error === WRONG || block === WRONG) return undefined;
  const usage = objectField(frame, 'usage') ?? objectField(message, 'usage');
  if (usage === WRONG) return undefined;
  const fields = {
    type: stringField(frame, 'type'),
    deltaType: stringField(delta, 'type'),
    text: stringField(delta, 'text'),
    thinking: stringField(delta, 'thinking'),
    stopReason: stringField(delta, 'stop_reason'),
    inputTokens: numberField(usage, 'input_tokens'),
    outputTokens: numberField(usage, 'output_tokens'),
    errorType: stringField(error, 'type'),
    index: numberField(frame, 'index'),
    blockType: stringField(block, 'type'),
    blockId: stringField(block, 'id'),
    blockName: stringField(block, 'name'),
    partialJson: stringField(delta, 'partial_json'),
  };
  if (Object.values(fields).includes(WRONG)) return undefined;
  return { ...(fields as Omit<StreamFrame, 'hasStopReason'>), hasStopReason: delta !== undefined && 'stop_reason' in delta };
}

/** Maps Anthropic stop reasons onto the contract's three. */
function anthropicFinish(reason: string | null | undefined): FinishReason {
  if (reason === 'max_tokens') return 'length';
  if (reason === 'refusal') return 'error';
  if (reason === 'tool_use') return 'tool_calls';
  return 'stop';
}

/** The request body in Anthropic's dialect. */
function anthropicBody(request: ProviderRequest): Record<string, unknown> {
  const answerTokens = request.maxTokens ?? DEFAULT_MAX_TOKENS;
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages: anthropicMessages(conversation(request)),
    stream: true,
    max_tokens: answerTokens,
  };
  const system = systemText(request);
  if (system) body.system = system;
  if (request.deepThinking) {
    // max_tokens covers thinking and answer; temperature must stay at its default with thinking on.
    body.thinking = { type: 'enabled', budget_tokens: request.model.thinkingBudget };
    body.max_tokens = request.model.thinkingBudget + answerTokens;
  } else if (request.temperature !== undefined) {
    // Anthropic's range is 0..1; the contract's is 0..2.
    body.temperature = Math.min(1, request.temperature);
  }
  addAnthropicOptions(body, request.options);
  return body;
}

/** Streams replies from Anthropic's Messages API. */
export class AnthropicProvider implements ChatProvider {
  readonly name = 'anthropic' as const;

  constructor(private readonly client: UpstreamClient) {}

  probeRequest(model: ModelConfig): { url: string; headers: Record<string, string> } {
    const base = (model.baseUrl ?? 'https://api.anthropic.com').replace(/\/+$/, '');
    const headers: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION };
    if (model.apiKey) headers['x-api-key'] = model.apiKey;
    return { url: /\/v1$/.test(base) ? `${base}/models` : `${base}/v1/models`, headers };
  }

  stream(request: ProviderRequest, signal: CancelSignal): ProviderStream {
    const base = (request.model.baseUrl ?? 'https://api.anthropic.com').replace(/\/+$/, '');
    const url = /\/v1$/.test(base) ? `${base}/messages` : `${base}/v1/messages`;
    const headers: Record<string, string> = { accept: 'text/event-stream', 'anthropic-version': ANTHROPIC_VERSION };
    if (request.model.apiKey) headers['x-api-key'] = request.model.apiKey;
    const body = this.client.stream({ subject: 'anthropic', url, headers, body: anthropicBody(request) }, signal);
    return readSse(body, new AnthropicReply(), 'anthropic', this.client.settings.maxFrameBytes);
  }
}

/** One streamed Messages reply, event by event. */
class AnthropicReply implements Dialect<EventSourceMessage, ProviderEvent> {
  private finish: FinishReason | undefined;
  private inputTokens = 0;
  private outputTokens = 0;
  /** Content block index → our tool-call index, and how much of each call's input arrived. */
  private readonly toolBlocks = new Map<number, { index: number; argumentChars: number }>();

  frame(message: EventSourceMessage, out: ProviderEvent[]): boolean {
    const frame = readFrame(message.data, readStreamFrame);
    if (!frame) throw malformedFrame('anthropic');
    const { toolBlocks } = this;
    switch (frame.type ?? message.event) {
      case 'message_start':
        this.inputTokens = frame.inputTokens ?? 0;
        this.outputTokens = frame.outputTokens ?? 0;
        break;
      case 'content_block_start':
        if (frame.blockType === 'tool_use') {
          const index = toolBlocks.size;
          toolBlocks.set(frame.index ?? index, { index, argumentChars: 0 });
          out.push({ type: 'tool_call', index, id: frame.blockId ?? `toolu_${index}`, name: frame.blockName ?? '', arguments: '' });
        }
        break;
      case 'content_block_delta':
        if (frame.deltaType === 'text_delta' && frame.text) out.push({ type: 'delta', text: frame.text });
        else if (frame.deltaType === 'thinking_delta' && frame.thinking) out.push({ type: 'thinking', text: frame.thinking });
        else if (frame.deltaType === 'input_json_delta' && frame.partialJson) {
          const call = toolBlocks.get(frame.index ?? -1);
          if (call) {
            call.argumentChars += frame.partialJson.length;
            out.push({ type: 'tool_call', index: call.index, arguments: frame.partialJson });
          }
        }
        break;
      case 'content_block_stop': {
        // A tool called without arguments streams no input at all: its arguments are `{}`, never empty text.
        const call = toolBlocks.get(frame.index ?? -1);
        if (call && call.argumentChars === 0) {
          call.argumentChars = 2;
          out.push({ type: 'tool_call', index: call.index, arguments: '{}' });
        }
        break;
      }
      case 'message_delta':
        if (frame.hasStopReason) this.finish = anthropicFinish(frame.stopReason);
        if (frame.outputTokens !== undefined) this.outputTokens = frame.outputTokens;
        if (frame.inputTokens !== undefined) this.inputTokens = frame.inputTokens;
        break;
      case 'message_stop':
        return true;
      case 'error': {
        const kind = frame.errorType ?? 'error';
        const text =
          kind === 'overloaded_error'
            ? 'The anthropic upstream is overloaded; try again shortly.'
            : 'The anthropic upstream reported an error in the middle of the reply.';
        throw new UpstreamError('upstream_error', text, `stream_${kind}`);
      }
      default:
        // ping and future event types carry nothing we need.
        break;
    }
    return false;
  }

  end(out: ProviderEvent[], terminal: boolean): void {
    if (!terminal) throw truncatedStream('anthropic');
    out.push({ type: 'finish', reason: this.finish ?? 'stop', usage: { inputTokens: this.inputTokens, outputTokens: this.outputTokens } });
  }
}
