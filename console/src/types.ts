/** What the operator API answers (docs: operations), as the console reads it. */
export type Role = "viewer" | "approver" | "admin"
export type Status = "running" | "waiting-for-approval" | "ended"

export interface Me {
  readonly name: string
  readonly role: Role
}

export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadTokens?: number
  readonly cacheWriteTokens?: number
}

export interface TaskSummary {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  readonly status: Status
  readonly outcome?: "completed" | "failed" | "cancelled"
  readonly createdAt: string
  readonly endedAt?: string
  readonly traceId?: string
}

export interface Turn {
  readonly step: number
  readonly at?: string
  readonly text?: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string }>
  readonly finishReason: string
  readonly usage: Usage
}

export interface Call {
  readonly toolCallId: string
  readonly name: string
  readonly arguments: string
  readonly deadlineAt: string
  readonly startedAt?: string
  readonly endedAt?: string
  readonly durationMillis?: number
  readonly outcome: string
  readonly failure?: string
  readonly error?: string
  readonly value?: unknown
}

export interface Approval {
  readonly toolCallId: string
  readonly toolName: string
  readonly input: unknown
  readonly decision: "pending" | "approved" | "denied"
  readonly reason?: string
  readonly askedAt?: string
  readonly expiresAt: string
  readonly decidedBy?: string
  readonly decidedAt?: string
}

export interface TaskView extends TaskSummary {
  readonly prompt: string
  readonly tools: ReadonlyArray<string>
  readonly usage: Usage
  readonly turns: ReadonlyArray<Turn>
  readonly calls: ReadonlyArray<Call>
  readonly approvals: ReadonlyArray<Approval>
  readonly children: ReadonlyArray<{ readonly taskId: string; readonly agentId: string; readonly status: Status }>
  readonly final?: unknown
}

export interface PendingApproval {
  readonly taskId: string
  readonly toolCallId: string
  readonly agentId: string
  readonly toolName: string
  readonly input: unknown
  readonly askedAt?: string
  readonly expiresAt: string
}

export interface Held {
  readonly held: number
  readonly max: number
}

export interface Agent {
  readonly agentId: string
  readonly processes: ReadonlyArray<{
    readonly processId: string
    readonly lastHeartbeatAt: string
    readonly live: boolean
    readonly watching: boolean
    readonly tools: ReadonlyArray<string>
    readonly manifestBytes: number
  }>
  readonly connections: number
  readonly tools: ReadonlyArray<string>
  readonly tasks: Held
  readonly promptBytes: Held
  readonly manifestBytes: Held
}

/** What a page gets: where to render, who is signed in, the console's settings, and the signal of its end. */
export interface PageContext {
  readonly root: HTMLElement
  readonly me: Me
  readonly traceUrl: string | null
  readonly signal: AbortSignal
}

export const canDecide = (me: Me): boolean => me.role === "approver" || me.role === "admin"
export const canCancel = (me: Me): boolean => me.role === "admin"
