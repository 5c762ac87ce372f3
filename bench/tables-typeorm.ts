// Type-graphql's decorators need the metadata polyfill before any class below is declared.
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import fastifyApollo from '@as-integrations/fastify';
import DataLoader from 'dataloader';
import Fastify from 'fastify';
import { GraphQLError } from 'graphql';
import { Arg, buildSchema, Ctx, Field, FieldResolver, InputType, Int, ObjectType, Query, registerEnumType, Resolver, Root } from 'type-graphql';
import { Column, DataSource, Entity, In, PrimaryGeneratedColumn, type Repository } from 'typeorm';
import { Refusal } from '../src/common/refusal';
import { resolveSession, type Session, type SessionSettings } from '../src/platform/session';
import type { BenchServer } from './processes';
import { GRAPHQL_PATH } from './shared';

/**
 * Baseline (b) of the tables benchmark: the same query served the way a type-graphql application
 * over TypeORM serves it, with the N+1 problem solved by DataLoaders. Entities for the three
 * tables, a resolver for the root list (the `user` role sees its own orders, the admin all) and a
 * field resolver per relationship, each batched per request by a DataLoader (one `IN` query for the
 * customers of the page, one for its items). It takes the generated API's argument shapes the
 * query uses (`limit`, `order_by` on `id`), so the one document runs unchanged. Served by stock
 * Apollo Server 5 on Fastify 5 (@as-integrations/fastify), the HTTP stack Plinth itself is built
 * on, with Plinth's session resolution: what differs from Plinth is the data layer.
 */

enum OrderBy {
  asc = 'asc',
  desc = 'desc',
}
registerEnumType(OrderBy, { name: 'order_by' });

@Entity({ name: 'shop_customers' })
@ObjectType('shop_customers')
class Customer {
  @PrimaryGeneratedColumn()
  @Field(() => Int)
  id!: number;

  @Column()
  @Field()
  name!: string;

  @Column()
  @Field()
  email!: string;

  @Column()
  @Field()
  vip!: boolean;
}

@Entity({ name: 'shop_order_items' })
@ObjectType('shop_order_items')
class OrderItem {
  @PrimaryGeneratedColumn()
  @Field(() => Int)
  id!: number;

  @Column({ name: 'order_id' })
  orderId!: number;

  @Column()
  @Field()
  sku!: string;

  @Column()
  @Field(() => Int)
  quantity!: number;

  @Column()
  @Field(() => Int)
  price_cents!: number;
}

@Entity({ name: 'shop_orders' })
@ObjectType('shop_orders')
class Order {
  @PrimaryGeneratedColumn()
  @Field(() => Int)
  id!: number;

  @Column({ name: 'customer_id' })
  customerId!: number;

  @Column({ name: 'user_id', type: 'uuid' })
  userId!: string;

  @Column()
  @Field()
  status!: string;

  // TypeORM reads a date column as its 'YYYY-MM-DD' text, as PostgreSQL's JSON writes it.
  @Column({ type: 'date' })
  @Field()
  placed_on!: string;

  @Column()
  @Field(() => Int)
  total_cents!: number;
}

@InputType('shop_orders_order_by')
class OrdersOrderBy {
  @Field(() => OrderBy, { nullable: true })
  id?: OrderBy;
}

@InputType('shop_order_items_order_by')
class ItemsOrderBy {
  @Field(() => OrderBy, { nullable: true })
  id?: OrderBy;
}

/** The request's session and its loaders (made per request, so batching never mixes callers). */
interface BaselineContext {
  session: Session;
  customers: DataLoader<number, Customer | null>;
  items: DataLoader<number, OrderItem[]>;
}

/** The direction `order_by` asks for `id` (the first item naming it), ascending when none does. */
function idDirection(orderBy: { id?: OrderBy }[] | undefined): 'ASC' | 'DESC' {
  return orderBy?.find((item) => item.id)?.id === OrderBy.desc ? 'DESC' : 'ASC';
}

@Resolver(() => Order)
class OrdersResolver {
  constructor(private readonly orders: Repository<Order>) {}

  @Query(() => [Order], { name: 'shop_orders' })
  shopOrders(
    @Ctx() { session }: BaselineContext,
    @Arg('limit', () => Int, { nullable: true }) limit?: number,
    @Arg('order_by', () => [OrdersOrderBy], { nullable: true }) orderBy?: OrdersOrderBy[],
  ): Promise<Order[]> {
    const admin = session.viaAdminSecret && session.role === 'admin';
    if (!admin && session.role !== 'user') throw new GraphQLError('field "shop_orders" not found in type: \'query_root\'');
    return this.orders.find({
      where: admin ? {} : { userId: session.userId ?? '' },
      order: { id: idDirection(orderBy) },
      take: limit,
    });
  }

  @FieldResolver(() => Customer, { nullable: true })
  customer(@Root() order: Order, @Ctx() { customers }: BaselineContext): Promise<Customer | null> {
    return customers.load(order.customerId);
  }

  @FieldResolver(() => [OrderItem])
  async items(
    @Root() order: Order,
    @Ctx() { items }: BaselineContext,
    @Arg('order_by', () => [ItemsOrderBy], { nullable: true }) orderBy?: ItemsOrderBy[],
  ): Promise<OrderItem[]> {
    const loaded = await items.load(order.id);
    return idDirection(orderBy) === 'DESC' ? [...loaded].reverse() : loaded;
  }
}

/** Per-request loaders: one query for the page's customers, one for its items (ascending by id). */
function loaders(dataSource: DataSource): Pick<BaselineContext, 'customers' | 'items'> {
  const customers = dataSource.getRepository(Customer);
  const items = dataSource.getRepository(OrderItem);
  return {
    customers: new DataLoader(async (ids) => {
      const byId = new Map((await customers.findBy({ id: In([...ids]) })).map((customer) => [customer.id, customer]));
      return ids.map((id) => byId.get(id) ?? null);
    }),
    items: new DataLoader(async (orderIds) => {
      const byOrder = new Map<number, OrderItem[]>(orderIds.map((id) => [id, []]));
      for (const item of await items.find({ where: { orderId: In([...orderIds]) }, order: { id: 'ASC' } })) byOrder.get(item.orderId)!.push(item);
      return orderIds.map((id) => byOrder.get(id)!);
    }),
  };
}

export async function startTypeormBaseline(databaseUrl: string, poolSize: number, sessionSettings: SessionSettings): Promise<BenchServer> {
  const dataSource = await new DataSource({
    type: 'postgres',
    url: databaseUrl,
    entities: [Customer, Order, OrderItem],
    synchronize: false,
    logging: false,
    extra: { max: poolSize, application_name: 'plinth-bench-typeorm' },
  }).initialize();
  const resolver = new OrdersResolver(dataSource.getRepository(Order));
  const schema = await buildSchema({
    resolvers: [OrdersResolver],
    container: { get: () => resolver },
    validate: false,
    emitSchemaFile: false,
  });
  const apollo = new ApolloServer<BaselineContext>({ schema });
  await apollo.start();
  const app = Fastify();
  await app.register(fastifyApollo(apollo), {
    path: GRAPHQL_PATH,
    context: async (request): Promise<BaselineContext> => {
      try {
        return { session: resolveSession(request.headers, sessionSettings), ...loaders(dataSource) };
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        throw new GraphQLError(error.message, { extensions: { code: error.code, http: { status: error.status } } });
      }
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${GRAPHQL_PATH}`,
    close: async () => {
      await app.close();
      await apollo.stop();
      await dataSource.destroy();
    },
  };
}
