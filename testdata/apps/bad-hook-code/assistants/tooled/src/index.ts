export function LookupOrdr(ctx: any, args: { order_id: string }) {
  return { order_id: args.order_id };
}
